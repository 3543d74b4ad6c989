"""drsftp/tuning/climb.py: the queue test, the retransmit test and the hill
climb's scaffolding that -P auto, -c auto and DRS's queue guard share."""

import pytest

from drsftp.tuning.climb import Base, Climb, Verdict, queued, rose


@pytest.mark.parametrize(("rtt", "want"), [(0.127, False), (0.1271, True)])
def test_a_queue_is_an_rtt_above_factor_times_the_base_plus_the_slack(rtt, want):
    assert queued(rtt, 0.1, 1.25, 0.002) is want


def test_the_slack_is_added_once_not_scaled():
    assert not queued(0.0105, 0.001, 1.0, 0.01)
    assert queued(0.0115, 0.001, 1.0, 0.01)


@pytest.mark.parametrize(("rtt", "base"), [(None, 0.1), (0.5, None), (None, None)])
def test_no_queue_where_an_rtt_is_unknown(rtt, base):
    assert not queued(rtt, base, 1.0, 0.0)


def test_a_base_of_zero_is_a_known_base():
    assert queued(0.001, 0.0, 1.25, 0.0)


def test_the_base_is_the_least_rtt_seen_and_judges_the_one_given():
    base = Base()
    assert not base.queued(0.2, 1.1, 0.0)  # the first sample is its own base
    assert base.rtt == 0.2
    assert not base.queued(0.1, 1.1, 0.0) and base.rtt == 0.1
    assert base.queued(0.111, 1.1, 0.0) and base.rtt == 0.1
    assert not base.queued(0.11, 1.1, 0.0)
    assert base.note(0.3) == 0.1 and base.note(0.05) == 0.05


@pytest.mark.parametrize(("count", "last", "want"),
                         [(5, 4, True), (4, 4, False), (3, 4, False), (5, None, False), (None, 4, False)])
def test_a_count_rose_only_above_a_known_last(count, last, want):
    assert rose(count, last) is want


def climb(**kw):
    return Climb(settle=4, judge=2, max_backoff=32, **kw)


def test_a_climb_waits_settle_intervals_before_its_first_probe_or_as_told():
    assert climb().backoff == 4 and climb(wait=5).backoff == 5
    c = climb()
    assert (c.since, c.history, c.baseline, c.queued_for) == (0, [], None, 0)


def test_the_next_probe_waits_backoff_intervals_since_the_last_change():
    c = climb()
    for _ in range(3):
        c.note(1.0, False)
        assert c.waiting
    c.note(1.0, False)
    assert not c.waiting
    c.changed()
    assert c.waiting


def test_note_counts_the_intervals_and_a_queue_that_stays():
    c = climb()
    for goodput, queue, want in [(1.0, True, 1), (2.0, True, 2), (3.0, False, 0), (4.0, True, 1)]:
        c.note(goodput, queue)
        assert c.queued_for == want
    assert c.since == 4 and c.history == [1.0, 2.0, 3.0, 4.0]


def test_the_mean_is_of_the_last_judge_intervals_and_zero_of_none():
    c = climb()
    assert c.mean() == 0.0
    for g in (10.0, 20.0, 40.0):
        c.note(g, False)
    assert c.mean() == 30.0


def test_a_probe_is_judged_against_the_mean_before_it_and_the_history_starts_again():
    c = climb()
    for g in (100.0, 100.0):
        c.note(g, False)
    c.probed()
    assert c.baseline == 100.0 and c.since == 0 and c.history == []


def judged(goodputs, *, needed=0.1, congested=False, settle=4):
    c = climb()
    c.baseline = 100.0
    for g in goodputs:
        c.note(g, False)
    return c.verdict(congested, settle, needed)


def test_a_probe_settles_then_is_kept_only_at_the_gain_needed():
    assert judged([200.0] * 3) is Verdict.WAIT
    assert judged([200.0] * 3, settle=3) is Verdict.KEEP
    assert judged([0.0, 0.0, 150.0, 150.0], needed=0.5) is Verdict.KEEP  # exactly half more
    assert judged([0.0, 0.0, 150.0, 149.9], needed=0.5) is Verdict.BACK


def test_a_queue_or_losses_give_a_probe_back_from_its_second_interval():
    assert judged([200.0], congested=True) is Verdict.WAIT
    assert judged([200.0, 200.0], congested=True) is Verdict.BACK


def test_kept_resets_the_wait_and_failed_doubles_it_up_to_the_most():
    c = climb()
    c.baseline, c.backoff = 1.0, 20
    c.note(1.0, False)
    c.failed()
    assert c.backoff == 32 and c.baseline is None and c.since == 1  # (the change resets the count)
    c.failed()
    assert c.backoff == 32
    c.baseline = 1.0
    c.kept()
    assert c.backoff == 4 and c.baseline is None and c.since == 0 and c.history == []


def test_sharing_needs_a_queue_for_judge_intervals_settled_and_no_buffer_cap():
    c = climb()
    for _ in range(4):
        c.note(1.0, True)
    assert c.sharing(0.05, 0.1)
    assert not c.sharing(0.1, 0.1)  # a cap held the senders a tenth of the time
    assert not c.sharing(None, 0.1)  # unknown
    c = climb()
    for queue in (True, True, True, False):
        c.note(1.0, queue)
    assert not c.sharing(0.0, 0.1)  # the queue went
    c = climb()
    for _ in range(3):
        c.note(1.0, True)
    assert not c.sharing(0.0, 0.1)  # not settled yet
