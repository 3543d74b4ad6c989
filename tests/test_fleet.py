"""drsftp/tuning/count/fleet.py: a dataset job's sessions x streams with their defaults
(docs/DATASETS.md, "Sessions x streams").  Expected values come from the RFCs
and the docs, written here, not read back from the module's constants
(docs/MUTATION.md: many of these tests pin a rule a mutation run found open)."""

import pytest
from test_sharing import Senders

from drsftp.tuning.count.fleet import Change, FleetConfig, FleetController, Kind, Work
from drsftp.tuning.count.streams import StreamSample

# -- fleet: sessions x streams with its defaults (docs/DATASETS.md, "Sessions x streams") ----

def _files(n, size=1 << 20, big=None):
    big = big or {}
    return Work(queued_files=n, queued_bytes=n * size, big_left=big, bytes_left=n * size + sum(big.values()))


QUIET = [StreamSample(0.1, 0.1)]


def _changes(ctl, goodputs, work, samples=QUIET):
    return [ctl.update(g, samples, work) for g in goodputs]


def test_sessions_start_at_16_and_grow_by_half_to_32_each_step_judged_after_5_intervals_by_10_percent():
    ctl = FleetController()
    assert ctl.sessions == 16 and ctl.connections == 16
    work = _files(10_000)
    assert _changes(ctl, [100.0] * 5, work) == [None] * 4 + [Change(Kind.SESSION, 8)] and ctl.sessions == 24
    up = 100.0 * (1 + 0.10)  # exactly 10% more (as the float the rule computes)
    assert _changes(ctl, [1.0, 1.0, 1.0, up, up], work) == [None] * 5 and ctl.sessions == 24  # kept
    assert _changes(ctl, [up] * 4, work)[-1] == Change(Kind.SESSION, 8) and ctl.sessions == 32  # after 4
    assert _changes(ctl, [up * 2] * 50, work) == [None] * 50 and ctl.sessions == 32  # 32 at most


def test_a_step_of_sessions_short_of_10_percent_is_given_back():
    ctl = FleetController()
    work = _files(10_000)
    _changes(ctl, [100.0] * 5, work)
    assert _changes(ctl, [100.0, 100.0, 100.0, 109.0, 110.9], work)[-1] == Change(Kind.SESSION, -8)
    assert ctl.sessions == 16


def test_from_one_session_each_step_adds_half_and_at_least_one():
    ctl = FleetController(FleetConfig(start_sessions=1))
    assert ctl.sessions == 1
    seen = []
    for _ in range(120):
        if ctl.update(100.0 * ctl.sessions, QUIET, _files(10_000)) is not None:  # every step pays
            seen.append(ctl.sessions)
    assert seen == [2, 3, 4, 6, 9, 13, 19, 28, 32]


def test_a_step_from_one_session_given_back_leaves_one():
    ctl = FleetController(FleetConfig(start_sessions=1))
    _changes(ctl, [100.0] * 5, _files(10_000))
    assert ctl.sessions == 2
    assert _changes(ctl, [100.0] * 5, _files(10_000))[-1] == Change(Kind.SESSION, -1) and ctl.sessions == 1


def test_probes_given_back_wait_twice_as_long_each_time_up_to_32_intervals():
    ctl = FleetController()
    at = [i for i, c in enumerate(_changes(ctl, [100.0] * 130, _files(10_000)), 1) if c is not None]
    # a probe after 5 intervals, judged 5 later; then waits of 10, 20, 32, 32
    assert at == [5, 10, 20, 25, 45, 50, 82, 87, 119, 124]


def test_sessions_are_added_only_while_more_files_wait_than_they_hold():
    ctl = FleetController()
    assert _changes(ctl, [100.0] * 10, _files(16)) == [None] * 10
    assert _changes(ctl, [100.0], _files(17)) == [Change(Kind.SESSION, 8)]


@pytest.mark.parametrize("left, goodput, probe", [
    (375, 100.0, False),  # 3.75 s: exactly 30 RTTs of 125 ms
    (376, 100.0, True),
    (10_000, 0.0, True),  # nothing measured yet: no end in sight
    (1, 0.5, False),  # 2 s at half a byte a second
])
def test_sessions_are_added_only_while_the_rest_outlasts_30_rtts(left, goodput, probe):
    ctl = FleetController(FleetConfig(session_settle=1))
    ctl.note_rtt(0.125)
    work = Work(queued_files=100, queued_bytes=left, bytes_left=left)
    assert (ctl.update(goodput, QUIET, work) is not None) is probe


def test_a_job_with_no_bytes_left_adds_no_session_however_slow():
    ctl = FleetController(FleetConfig(session_settle=1))
    assert ctl.update(0.01, QUIET, Work(queued_files=100, queued_bytes=0)) is None


def test_a_stream_goes_to_the_big_file_with_most_left_while_big_files_hold_as_much_as_the_queue():
    ctl = FleetController()
    assert (ctl.start_file("a"), ctl.start_file("b")) == (4, 4)
    assert ctl.connections == 16 + 4 + 4
    work = Work(queued_files=100, queued_bytes=800, big_left={"a": 300, "b": 500}, bytes_left=1600)
    samples = QUIET * 24
    assert _changes(ctl, [100.0] * 5, work, samples)[-1] == Change(Kind.STREAM, 1, "b")
    assert ctl.streams == {"a": 4, "b": 5}
    # judged after 4 intervals: among 24 connections a stream must add 5% (half a share is less)
    assert _changes(ctl, [100.0, 100.0, 104.0, 105.9], work, samples)[-1] == Change(Kind.STREAM, -1, "b")
    assert ctl.streams == {"a": 4, "b": 4}


def test_a_stream_among_four_connections_must_add_an_eighth():
    ctl = FleetController(FleetConfig(start_sessions=1))
    ctl.start_file("f", 3)
    work = Work(queued_files=0, queued_bytes=0, big_left={"f": 10**9}, bytes_left=10**9)
    _changes(ctl, [100.0] * 5, work, QUIET * 4)
    assert ctl.streams["f"] == 4
    assert _changes(ctl, [100.0, 100.0, 112.5, 112.5], work, QUIET * 4) == [None] * 4 and ctl.streams["f"] == 4
    ctl = FleetController(FleetConfig(start_sessions=1))
    ctl.start_file("f", 3)
    _changes(ctl, [100.0] * 5, work, QUIET * 4)
    assert _changes(ctl, [100.0, 100.0, 112.0, 112.0], work, QUIET * 4)[-1] == Change(Kind.STREAM, -1, "f")


@pytest.mark.parametrize("after, kept", [(150.0, True), (149.0, False)])
def test_a_stream_on_a_lone_connection_must_add_half(after, kept):
    ctl = FleetController(FleetConfig(start_sessions=1))
    ctl.start_file("f", 1)
    work = Work(queued_files=0, queued_bytes=0, big_left={"f": 10**9}, bytes_left=10**9)
    _changes(ctl, [100.0] * 5, work)
    assert _changes(ctl, [100.0, 100.0, after, after], work)[-1] == (None if kept else Change(Kind.STREAM, -1, "f"))


def test_a_big_file_starts_with_4_streams_and_grows_to_16_at_most():
    ctl = FleetController()
    assert (ctl.start_file("x"), ctl.start_file("y", 1), ctl.start_file("z", 40)) == (4, 1, 16)
    ctl = FleetController()
    ctl.start_file("f", 15)
    work = Work(queued_files=0, queued_bytes=0, big_left={"f": 10**9}, bytes_left=10**9)
    assert _changes(ctl, [100.0] * 5, work)[-1] == Change(Kind.STREAM, 1, "f")
    assert _changes(ctl, [200.0] * 60, work) == [None] * 60 and ctl.streams["f"] == 16


def test_a_probe_ends_with_its_own_file_only_and_a_session_limit_leaves_a_stream_probe_alone():
    for interrupt in (lambda ctl: ctl.end_file("other"), lambda ctl: ctl.limit_sessions(8)):
        ctl = FleetController()
        ctl.start_file("f")
        ctl.start_file("other")
        work = Work(queued_files=0, queued_bytes=0, big_left={"f": 10**9}, bytes_left=10**9)
        assert _changes(ctl, [100.0] * 5, work)[-1] == Change(Kind.STREAM, 1, "f")
        interrupt(ctl)
        assert _changes(ctl, [100.0] * 4, work)[-1] == Change(Kind.STREAM, -1, "f")  # still judged
    ctl = FleetController()
    ctl.start_file("f")
    _changes(ctl, [100.0] * 5, work)
    ctl.end_file("f")
    assert _changes(ctl, [100.0] * 4, work) == [None] * 4  # nothing left to judge


def test_a_server_limit_of_none_leaves_one_session():
    ctl = FleetController()
    ctl.limit_sessions(0)
    assert ctl.sessions == 1


def test_judgment_is_by_the_mean_of_the_intervals_there_are():
    """With fewer intervals than ``judge`` on a side, each side is the mean
    of what it has (3 before the probe, 2 after)."""
    ctl = FleetController(FleetConfig(session_settle=3, settle=2, judge=4))
    ctl.start_file("f")
    work = Work(queued_files=0, queued_bytes=0, big_left={"f": 10**9}, bytes_left=10**9)
    assert _changes(ctl, [100.0] * 3, work)[-1] == Change(Kind.STREAM, 1, "f")
    assert _changes(ctl, [200.0, 200.0], work) == [None, None] and ctl.streams["f"] == 5


def test_the_fleet_reads_a_queue_above_1_25_times_the_senders_least_rtt_plus_2_ms():
    for rtt, change in ((0.124, Change(Kind.SESSION, 8)), (0.128, None)):
        ctl, senders = FleetController(), Senders()
        ctl.update(100.0, [], _files(10_000), path=senders(rtt=0.1))
        got = [ctl.update(100.0, [], _files(10_000), path=senders(rtt=rtt)) for _ in range(4)]
        assert got == [None] * 3 + [change]


def test_the_fleet_gives_sessions_back_to_a_queue_of_two_intervals_running_that_no_cap_explains():
    """16 sessions, no file waiting: the queue's give-back is a step to 2/3 (10)."""
    for limited, last in ((0.05, Change(Kind.SESSION, -6)), (0.1, None)):
        ctl, senders = FleetController(), Senders()
        got = [ctl.update(100.0, [], Work(0, 0), path=senders(rtt=rtt, limited=limited))
               for rtt in (0.1, 0.15, 0.1, 0.15, 0.15)]
        assert got == [None] * 4 + [last]
    ctl, senders = FleetController(), Senders()  # settled after 4 intervals, the queue two of them
    got = [ctl.update(100.0, [], Work(0, 0), path=senders(rtt=rtt, limited=0.05)) for rtt in (0.1, 0.1, 0.15, 0.15)]
    assert got[-1] == Change(Kind.SESSION, -6)
    # then the next step of sessions waits twice the first wait (5 intervals)
    got = [ctl.update(100.0, [], _files(10_000), path=senders(limited=0.05)) for _ in range(10)]
    assert got == [None] * 9 + [Change(Kind.SESSION, 5)]


def test_the_fleet_gives_back_a_stream_of_the_big_file_with_the_most():
    ctl, senders = FleetController(fixed_sessions=4), Senders()
    ctl.start_file("a", 2)
    ctl.start_file("b", 4)
    got = [ctl.update(100.0, [], Work(0, 0), path=senders(rtt=rtt, limited=0.05)) for rtt in (0.1, 0.1, 0.15, 0.15)]
    assert got[-1] == Change(Kind.STREAM, -1, "b")
