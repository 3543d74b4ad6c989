"""-P auto's aggregate window under DRS (drsftp/tuning/count/window.py) with
its defaults: the rules the other unit tests left open, each test killing
mutants tools/mutation.py found surviving (docs/MUTATION.md).  The
figures come from docs/PARALLEL.md ("-P auto") and
docs/decisions/0021-streams-that-share.md, 0026-trim-on-the-median-rtt.md,
written here, not read back from the module's constants: an interval to
settle 4, a probe judged 7 intervals on by the median of the last 4, a
probe of a quarter of a stream's cap doubled after each kept, kept at half
of what its step carries or more, given back under a fifth, a queue at 1.1
x the base + 2 ms for two intervals, a trim at 1.02 x the base + 2 ms, at
most a 0.85 cut; the window held by us at a tenth of the busy time."""

import pytest
from test_sharing import Senders  # (its default RTT is BASE)

from drsftp.tuning.count.sharing import PathSample
from drsftp.tuning.count.streams import Action, StreamSample, StreamsConfig
from drsftp.tuning.count.window import WindowedStreams

MiB = 1 << 20
CAP = 4 * MiB  # the host's per-socket window (wmem_max 4 MiB)
QUARTER = 1 * MiB  # a first probe: a quarter of a stream's cap
BASE = 0.1  # seconds
RATE = 100e6  # bytes/s: drained to a window of 10 MB at 100 ms


def auto(**kw) -> WindowedStreams:
    return WindowedStreams(StreamsConfig(**{"start": 8, "window_cap": CAP, **kw}))


def drained(rate: float = RATE, base: float = BASE, **kw) -> tuple[WindowedStreams, Senders]:
    """The start ended by a queue that stays (no probe: no cap holds the
    senders): the window is rate x base RTT."""
    ctl, path = auto(**kw), Senders()
    ctl.update(rate, [], path=path(rtt=base, limited=0.05))
    for _ in range(3):
        ctl.update(rate, [], path=path(rtt=1.6 * base, limited=0.05))
    assert ctl.window == max(CAP, min(ctl.streams * CAP, int(rate * base)))
    return ctl, path


def probed(rate: float = RATE, **kw) -> tuple[WindowedStreams, Senders, int]:
    """Drained, then the first probe 4 intervals on; the window before it."""
    ctl, path = drained(**kw)
    w = ctl.window
    acts = [ctl.update(rate, [], path=path()) for _ in range(4)]
    assert acts == [Action.HOLD] * 4 and ctl.window == w + QUARTER and ctl.streams == 8
    return ctl, path, w


def test_the_start_probes_with_a_stream_once_it_settled_four_intervals():
    ctl, path = auto(), Senders()
    assert [ctl.update(RATE, [], path=path()) for _ in range(4)] == [Action.HOLD] * 3 + [Action.ADD]


def test_the_start_still_ramps_when_its_last_interval_grew_by_over_a_quarter():
    ctl, path = auto(), Senders()
    acts = [ctl.update(g, [], path=path()) for g in (RATE, RATE, RATE, 1.3 * RATE, 1.3 * RATE, 1.3 * RATE)]
    assert acts == [Action.HOLD] * 5 + [Action.ADD]


def test_the_start_adds_no_stream_past_16_or_where_the_driver_cannot():
    ctl, path = auto(start=16), Senders()
    assert {ctl.update(RATE, [], path=path()) for _ in range(8)} == {Action.HOLD} and ctl.streams == 16
    ctl, path = auto(), Senders()
    ctl.refused(Action.ADD, running=8)  # at the start: no window to bound yet
    assert ctl.fixed and ctl.window is None
    assert {ctl.update(RATE, [], path=path()) for _ in range(40)} == {Action.HOLD} and ctl.streams == 8


def test_a_start_probe_that_carried_nothing_gives_its_stream_back():
    for goodput in (RATE, 0.0):  # (0: a stall, nothing to expect of the stream)
        ctl = auto()  # no figures from anywhere: no RTT, no base
        assert [ctl.update(goodput, []) for _ in range(4)][-1] is Action.ADD and ctl.streams == 9
        acts = [ctl.update(goodput, []) for _ in range(7)]
        assert acts == [Action.HOLD] * 6 + [Action.REMOVE] and ctl.streams == 8


def test_the_first_window_probe_is_a_quarter_cap_and_the_streams_stay():
    probed()


def test_a_probe_is_judged_seven_intervals_on_and_one_that_carried_nothing_is_given_back():
    ctl, path, w = probed()
    assert [ctl.update(RATE, [], path=path()) for _ in range(6)] == [Action.HOLD] * 6
    assert ctl.window == w + QUARTER
    assert ctl.update(RATE, [], path=path()) is Action.HOLD and ctl.window == w  # no stream to give back


def test_new_retransmits_judge_a_probe_in_its_second_interval():
    ctl, path, w = probed()
    ctl.update(RATE, [], path=path(retransmits=1))
    assert ctl.window == w + QUARTER
    ctl.update(RATE, [], path=path(retransmits=1))
    assert ctl.window == w


def test_a_probe_carrying_exactly_half_its_step_is_kept_and_the_next_steps_double_up_to_8x():
    """The step carries 1 MiB / 100 ms where nobody uses the capacity."""
    ctl, path, w = probed()
    expected = QUARTER / BASE
    for _ in range(7):
        ctl.update(RATE + 0.5 * expected, [], path=path())
    assert ctl.window == w + QUARTER and ctl._probe is None  # kept
    steps, g = [], RATE
    for _ in range(4):
        for _ in range(4):
            ctl.update(g, [], path=path())
        steps.append(ctl._probe)
        g *= 2  # (double the goodput: kept)
        for _ in range(7):
            ctl.update(g, [], path=path())
    assert steps == [2 * QUARTER, 4 * QUARTER, 8 * QUARTER, 8 * QUARTER]


def test_a_probe_carrying_exactly_a_fifth_took_from_flows_beside_it():
    ctl, path, w = probed()
    got = RATE + 0.2 * (QUARTER / BASE)
    for _ in range(7):
        ctl.update(got, [], path=path())
    assert ctl.window == int(0.85 * got * BASE) < w  # the best goodput x base RTT, less the headroom
    ctl, path, w = probed()
    for _ in range(7):  # under a fifth: it only filled a queue of our own
        ctl.update(RATE + 0.15 * (QUARTER / BASE), [], path=path())
    assert ctl.window == w


def test_the_cut_after_a_probe_sizes_the_window_by_what_it_carried_per_base_rtt():
    ctl, path = drained()  # 10 MB carrying 90 MB/s x 100 ms: 0.9 of it
    for _ in range(4):
        ctl.update(90e6, [], path=path())
    got = 90e6 + 0.3 * (QUARTER * 90e6 / 10e6)  # (the step in proportion to the window: 90%)
    for _ in range(7):
        ctl.update(got, [], path=path())
    assert ctl.window == int(0.85 * got * BASE / 0.9)


def test_what_the_window_carries_per_base_rtt_is_averaged_within_a_half_and_one():
    """Each settled interval's median goodput x base RTT / window, within
    [0.5, 1], weighs a quarter against three quarters of what it was."""
    ctl, path = drained()  # 10 MB
    goodputs = [60e6] * 7 + [30e6] * 4 + [150e6] * 4
    for k, g in enumerate(goodputs):  # (a tenth: still held by our window)
        ctl.update(g, [], path=path(limited=0.1 if k == 12 else 0.5), intervals_left=4)  # no probe
    want = None
    for sample in (0.6, 0.6, 0.6, 0.6, 0.6, 0.5, 0.5, 0.5, 0.5, 0.9, 1.0, 1.0):  # medians of 4: 45 MB/s,
        want = sample if want is None else 0.75 * want + 0.25 * sample  # 30 at least a half, 150 at most 1
    assert ctl._yield == pytest.approx(want)
    ctl, path = drained()
    for _ in range(4):  # senders that report no limited time
        ctl.update(RATE, [], path=PathSample(BASE, 0), intervals_left=4)
    assert ctl._yield == 1.0


def test_a_probe_expects_its_step_at_the_base_rtt_or_in_proportion_to_the_window_where_less():
    for rate, expected in ((50e6, QUARTER * 5), (150e6, QUARTER * 10)):  # 50 or 150 MB/s in 10 MB
        ctl, path = drained()
        for _ in range(4):
            ctl.update(rate, [], path=path())
        assert ctl._probe == QUARTER
        for _ in range(7):
            ctl.update(rate + 0.5 * expected, [], path=path())
        assert ctl._probe is None and ctl.window == 10_000_000 + QUARTER  # kept


def test_a_window_held_by_us_a_tenth_of_the_busy_time_is_probed():
    ctl, path = drained()
    for _ in range(4):
        ctl.update(RATE, [], path=path(limited=0.1))
    assert ctl.window == 10_000_000 + QUARTER


def test_a_probe_is_made_only_while_eight_intervals_are_left():
    for left, window in ((8, 10_000_000 + QUARTER), (7, 10_000_000)):
        ctl, path = drained()
        for _ in range(4):
            ctl.update(RATE, [], path=path(), intervals_left=left)
        assert ctl.window == window


def test_one_interval_of_queue_is_a_burst_two_cut_the_window():
    ctl, path = drained()
    for _ in range(4):  # settled, no probe: no cap holds the senders
        ctl.update(RATE, [], path=path(limited=0.05))
    ctl.update(RATE, [], path=path(rtt=0.13, limited=0.05))
    assert ctl.window == 10_000_000
    ctl.update(RATE, [], path=path(rtt=0.13, limited=0.05))
    assert ctl.window == 8_500_000


def test_a_trim_cuts_at_most_the_headroom_on_a_short_path():
    """Base 5 ms: the queue mark 7.5 ms, the trim's 7.1 ms; a median of 7.4
    ms would trim to 5/7.4 of the window, the headroom stops it at 0.85."""
    ctl, path = drained(rate=2e9, base=0.005)  # 10 MB
    for _ in range(4):
        ctl.update(2e9, [], path=path(rtt=0.0074, limited=0.05))
    assert ctl.window == 8_500_000


def test_a_probe_passing_the_streams_caps_adds_a_stream():
    ctl, path = drained(start=2)  # 2 streams at their caps
    assert ctl.window == 2 * CAP
    acts = [ctl.update(RATE, [], path=path()) for _ in range(4)]
    assert acts[-1] is Action.ADD and ctl.streams == 3 and ctl.window == 2 * CAP + QUARTER


def test_a_fixed_driver_probes_only_the_room_its_streams_caps_leave():
    ctl, path = drained()
    ctl.refused(Action.ADD, running=8)
    ctl.window = 8 * CAP - 1000
    for _ in range(32):  # (a refusal: the longest wait)
        ctl.update(RATE, [], path=path())
    assert ctl.window == 8 * CAP and ctl._probe == 1000
    for _ in range(7):  # kept: it carried its 1000 bytes per 100 ms
        ctl.update(RATE + 0.5 * 1000 / BASE, [], path=path())
    for _ in range(8):
        ctl.update(RATE + 0.5 * 1000 / BASE, [], path=path())
    assert ctl.window == 8 * CAP and ctl._probe is None  # no room: no probe


def test_without_the_senders_figures_each_streams_own_rtts_tell_the_base_and_the_queue():
    ctl = auto()
    ctl.update(RATE, [StreamSample(0.106, 0.1), StreamSample(0.12, 0.12)])
    assert ctl._base == 0.1 and ctl._rtt_now == 0.106 and ctl.climb.queued_for == 0
    ctl.update(RATE, [StreamSample(0.1, 0.09), StreamSample(0.2, 0.2)])
    assert ctl._base == 0.09 and ctl.climb.queued_for == 0
    ctl.update(RATE, [StreamSample(0.109, 0.1)])  # under 1.1 x 100 + 2 ms
    assert ctl.climb.queued_for == 0
    ctl.update(RATE, [StreamSample(0.113, 0.1)])  # over 1.1 x 100 + 2 ms
    assert ctl.climb.queued_for == 1


def test_each_streams_share_is_whole_bytes():
    ctl = auto(start=4)
    ctl.window = 3 * CAP + 3  # (setsockopt takes an int)
    assert ctl.stream_window == 3 * CAP // 4 and isinstance(ctl.stream_window, int)
