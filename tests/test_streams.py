"""drsftp/tuning/count/streams.py: `-P auto`'s stream count with its defaults
(docs/PARALLEL.md, "-P auto").  Expected values come from the RFCs and the
docs, written here, not read back from the module's constants
(docs/MUTATION.md: many of these tests pin a rule a mutation run found open)."""

import dataclasses
import math

import pytest
from test_fleet import _files
from test_sharing import Senders

from drsftp.tuning.count.fleet import Change, FleetConfig, FleetController, Kind, Work
from drsftp.tuning.count.streams import Action, StreamController, StreamSample, StreamsConfig

# -- streams: -P auto with its defaults (docs/PARALLEL.md, "-P auto") -----------------------

def _quiet(n):
    """n streams' samples: RTT at its minimum, no retransmits counted."""
    return [StreamSample(0.1, 0.1) for _ in range(n)]


def _run_streams(ctl, goodputs):
    return [ctl.update(g, _quiet(ctl.streams)) for g in goodputs]


@pytest.mark.parametrize("cls", [StreamController, FleetController])
def test_the_interval_is_4_rtts_and_at_least_a_quarter_second(cls):
    assert cls.interval(0.1) == pytest.approx(0.4)
    assert cls.interval(0.05) == pytest.approx(0.25) and cls.interval(0.01) == 0.25
    assert cls.interval(None) == 0.25


def test_auto_starts_at_4_streams_and_runs_16_at_most():
    assert StreamController().streams == 4
    assert StreamController(StreamsConfig(start=40)).streams == 16
    ctl = StreamController(StreamsConfig(start=15))
    assert _run_streams(ctl, [100.0] * 4)[-1] is Action.ADD and ctl.streams == 16
    assert _run_streams(ctl, [200.0] * 40).count(Action.ADD) == 0  # kept, and no 17th


def test_a_probe_after_4_intervals_is_judged_4_later_by_the_last_2_against_max_5_percent_or_half_a_share():
    # 4 streams before the probe: the fifth must add 50% / 4 = 12.5%
    ctl = StreamController()
    assert _run_streams(ctl, [100.0] * 4) == [Action.HOLD] * 3 + [Action.ADD]
    assert _run_streams(ctl, [1.0, 1.0, 112.5, 112.5]) == [Action.HOLD] * 4 and ctl.streams == 5  # kept
    ctl = StreamController()
    _run_streams(ctl, [100.0] * 4)
    assert _run_streams(ctl, [1.0, 1.0, 112.0, 112.9])[-1] is Action.REMOVE and ctl.streams == 4  # 12.5% short
    # one stream before: the second must add 50%; twelve before: 5% (50% / 12 is less)
    for start, kept, short in ((1, 150.0, 149.0), (12, 105.0, 104.9)):
        for after, streams in ((kept, start + 1), (short, start)):
            ctl = StreamController(StreamsConfig(start=start))
            _run_streams(ctl, [100.0] * 4)
            _run_streams(ctl, [100.0, 100.0, after, after])
            assert ctl.streams == streams, (start, after)


def test_a_probe_given_back_doubles_the_wait_for_the_next_up_to_32_intervals():
    ctl = StreamController()
    adds = [i for i, a in enumerate(_run_streams(ctl, [100.0] * 200), 1) if a is Action.ADD]
    # each probe is judged 4 intervals after it; the next waits 8, 16, 32, 32 after that
    assert adds == [4, 16, 36, 72, 108, 144, 180]


def test_a_stream_queues_above_1_25_times_its_minimum_plus_2_ms():
    at = 0.1 * 1.25 + 0.002
    for rtt, queued in ((0.1 * 1.25 + 0.0015, False), (at, False), (math.nextafter(at, 1.0), True)):
        ctl = StreamController()
        assert ctl.queue([StreamSample(rtt, 0.1)]) is queued, rtt
        ffc = FleetController(FleetConfig(session_settle=1))
        assert (ffc.update(100.0, [StreamSample(rtt, 0.1)], _files(10_000)) is None) is queued, rtt


def test_stream_configs_and_samples_are_values():
    for value, field in ((StreamSample(0.1, 0.1), "rtt"), (StreamsConfig(), "start"),
                         (Change(Kind.SESSION, 1), "delta"), (Work(1, 1), "queued_files"),
                         (FleetConfig(), "start_sessions")):
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(value, field, getattr(value, field))


def test_a_change_the_driver_cannot_make_is_undone_and_the_next_probe_waits_32_intervals():
    ctl = StreamController()
    assert _run_streams(ctl, [100.0] * 4)[-1] is Action.ADD
    ctl.refused(Action.ADD)  # no range left worth a session
    assert ctl.streams == 4
    assert _run_streams(ctl, [100.0] * 32).index(Action.ADD) == 31
    ctl = StreamController()
    _run_streams(ctl, [100.0] * 4)
    assert _run_streams(ctl, [100.0] * 4)[-1] is Action.REMOVE and ctl.streams == 4
    ctl.refused(Action.REMOVE)  # a stream that could not be ended runs on
    assert ctl.streams == 5


def test_a_new_streams_sample_joining_later_in_the_probe_is_no_retransmit():
    """A sample without a retransmit count carries none: the driver's
    fifth sample, there once the new stream connected, is no new loss."""
    ctl = StreamController()
    _run_streams(ctl, [100.0] * 4)
    actions = [ctl.update(g, _quiet(n)) for g, n in ((1.0, 4), (1.0, 4), (112.5, 5), (112.5, 5))]
    assert actions == [Action.HOLD] * 4 and ctl.streams == 5


def test_a_stream_probe_is_judged_by_the_mean_of_the_intervals_there_are():
    """With ``judge`` longer than the settling, each side is the mean of
    what it has: 4 intervals before the second probe, 2 after it."""
    ctl = StreamController(StreamsConfig(settle=2, judge=8))
    assert _run_streams(ctl, [100.0] * 4) == [Action.HOLD, Action.ADD, Action.HOLD, Action.REMOVE]
    assert _run_streams(ctl, [100.0] * 4)[-1] is Action.ADD  # after a wait of 4
    assert _run_streams(ctl, [200.0, 200.0]) == [Action.HOLD, Action.HOLD] and ctl.streams == 5


def _by_path(ctl, senders, n, **kw):
    return [ctl.update(100.0, [], path=senders(**kw)) for _ in range(n)]


def test_the_senders_rtt_queues_above_1_25_times_its_least_plus_2_ms_and_their_retransmits_count():
    ctl, senders = StreamController(), Senders()
    ctl.update(100.0, [], path=senders(rtt=0.1))
    assert _by_path(ctl, senders, 3, rtt=0.126)[-1] is Action.ADD  # under 127 ms
    ctl, senders = StreamController(), Senders()
    assert set(_by_path(ctl, senders, 8, retransmits=1)) == {Action.HOLD}


def test_a_queue_no_cap_explains_gives_a_stream_back_once_settled_then_the_wait_doubles():
    ctl, senders = StreamController(), Senders()  # 4 streams
    acts = _by_path(ctl, senders, 1, limited=0.05) + _by_path(ctl, senders, 3, rtt=0.15, limited=0.05)
    assert acts == [Action.HOLD] * 3 + [Action.REMOVE] and ctl.streams == 3
    assert _by_path(ctl, senders, 8) == [Action.HOLD] * 7 + [Action.ADD]  # 4 x 2 intervals
    for limited, start in ((0.1, 4), (0.05, 1)):  # the caps held them a tenth of the time; one stream stays
        ctl, senders = StreamController(StreamsConfig(start=start)), Senders()
        _by_path(ctl, senders, 1, limited=limited)
        assert set(_by_path(ctl, senders, 8, rtt=0.15, limited=limited)) == {Action.HOLD}
        assert ctl.streams == start
