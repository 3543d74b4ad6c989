"""Rules of the sans-IO tuning modules (drsftp/tuning) the other unit tests
left open: each test kills mutants benchmarks/mutation.py found surviving
(docs/MUTATION.md).  Expected values come from docs/DESIGN.md,
docs/PARALLEL.md and docs/DATASETS.md, written here, not read back from
the modules' constants."""

import dataclasses
import math

import pytest

from drsftp.tuning import Role
from drsftp.tuning.actuation import HostLimits
from drsftp.tuning.base import parse_buffer
from drsftp.tuning.controller import SocketController
from drsftp.tuning.fleet import Change, FleetConfig, FleetController, Kind, Work
from drsftp.tuning.pathstreams import PathStreams
from drsftp.tuning.sharing import LimitMeter, PathSample, from_infos
from drsftp.tuning.streams import Action, StreamController, StreamSample, StreamsConfig

KiB, MiB, GiB = 1 << 10, 1 << 20, 1 << 30
STOCK = HostLimits(rmem_max=8 * MiB, wmem_max=8 * MiB, tcp_rmem=(4096, 131072, 6 * MiB),
                   tcp_wmem=(4096, 16384, 4 * MiB), congestion_control="cubic", can_force=False)

# -- base: buffer sizes (docs/DESIGN.md #kf-doubling: the kernel doubles an int) ------------


def test_a_socket_buffer_of_1_gib_is_accepted_and_one_byte_more_is_not():
    assert parse_buffer("1GiB") == GiB
    assert parse_buffer(str(GiB)) == GiB
    with pytest.raises(ValueError, match="at most 1 GiB"):
        parse_buffer(str(GiB + 1))


# -- controller: the rate and the timeline -----------------------------------------------

def _receiver(now):
    ctl = SocketController("kernel", Role.RECEIVER, limits=STOCK)
    ctl.attach(now=now)
    return ctl


def _info(received):
    return {"snd_mss": 1448, "bytes_received": received, "rcv_rtt": 1000}


def test_the_rate_is_the_bytes_over_the_seconds_between_samples_50_ms_apart_at_least():
    ctl = _receiver(10.0)
    ctl.tick(_info(0), 0, now=10.0)
    ctl.tick(_info(1_000_000), 0, now=10.1)
    assert ctl.rate == pytest.approx(10e6)  # 1 MB in 100 ms
    ctl.tick(_info(1_500_000), 0, now=10.12)  # 20 ms on: too short a span to measure
    assert ctl.rate == pytest.approx(10e6)
    ctl.tick(_info(2_000_000), 0, now=10.2)
    assert ctl.rate == pytest.approx(10e6)  # 1 MB over the 100 ms since the last sample taken


def test_timeline_times_count_from_the_attach():
    ctl = _receiver(100.0)
    ctl.tick(_info(0), 0, now=100.0)
    ctl.record(100.5, 1, 2)
    assert ctl.stats.timeline[-1]["t"] == 0.5


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
        ctl, senders = FleetController(), _Senders()
        ctl.update(100.0, [], _files(10_000), path=senders(rtt=0.1))
        got = [ctl.update(100.0, [], _files(10_000), path=senders(rtt=rtt)) for _ in range(4)]
        assert got == [None] * 3 + [change]


def test_the_fleet_gives_sessions_back_to_a_queue_of_two_intervals_running_that_no_cap_explains():
    """16 sessions, no file waiting: the queue's give-back is a step to 2/3 (10)."""
    for limited, last in ((0.05, Change(Kind.SESSION, -6)), (0.1, None)):
        ctl, senders = FleetController(), _Senders()
        got = [ctl.update(100.0, [], Work(0, 0), path=senders(rtt=rtt, limited=limited))
               for rtt in (0.1, 0.15, 0.1, 0.15, 0.15)]
        assert got == [None] * 4 + [last]
    ctl, senders = FleetController(), _Senders()  # settled after 4 intervals, the queue two of them
    got = [ctl.update(100.0, [], Work(0, 0), path=senders(rtt=rtt, limited=0.05)) for rtt in (0.1, 0.1, 0.15, 0.15)]
    assert got[-1] == Change(Kind.SESSION, -6)
    # then the next step of sessions waits twice the first wait (5 intervals)
    got = [ctl.update(100.0, [], _files(10_000), path=senders(limited=0.05)) for _ in range(10)]
    assert got == [None] * 9 + [Change(Kind.SESSION, 5)]


def test_the_fleet_gives_back_a_stream_of_the_big_file_with_the_most():
    ctl, senders = FleetController(fixed_sessions=4), _Senders()
    ctl.start_file("a", 2)
    ctl.start_file("b", 4)
    got = [ctl.update(100.0, [], Work(0, 0), path=senders(rtt=rtt, limited=0.05)) for rtt in (0.1, 0.1, 0.15, 0.15)]
    assert got[-1] == Change(Kind.STREAM, -1, "b")

# -- streams: the senders' figures (docs/PARALLEL.md, "-P auto", without DRS) -----------------

class _Senders:
    """Cumulative sender figures a path sample sums: ``limited`` of each interval's busy time."""

    def __init__(self):
        self.busy = self.limited = self.retrans = 0

    def __call__(self, rtt=0.1, limited=0.5, retransmits=0):
        self.busy += 1_000_000
        self.limited += int(limited * 1_000_000)
        self.retrans += retransmits
        return PathSample(rtt, self.retrans, self.busy, self.limited)


def _by_path(ctl, senders, n, **kw):
    return [ctl.update(100.0, [], path=senders(**kw)) for _ in range(n)]


def test_the_senders_rtt_queues_above_1_25_times_its_least_plus_2_ms_and_their_retransmits_count():
    ctl, senders = StreamController(), _Senders()
    ctl.update(100.0, [], path=senders(rtt=0.1))
    assert _by_path(ctl, senders, 3, rtt=0.126)[-1] is Action.ADD  # under 127 ms
    ctl, senders = StreamController(), _Senders()
    assert set(_by_path(ctl, senders, 8, retransmits=1)) == {Action.HOLD}


def test_a_queue_no_cap_explains_gives_a_stream_back_once_settled_then_the_wait_doubles():
    ctl, senders = StreamController(), _Senders()  # 4 streams
    acts = _by_path(ctl, senders, 1, limited=0.05) + _by_path(ctl, senders, 3, rtt=0.15, limited=0.05)
    assert acts == [Action.HOLD] * 3 + [Action.REMOVE] and ctl.streams == 3
    assert _by_path(ctl, senders, 8) == [Action.HOLD] * 7 + [Action.ADD]  # 4 x 2 intervals
    for limited, start in ((0.1, 4), (0.05, 1)):  # the caps held them a tenth of the time; one stream stays
        ctl, senders = StreamController(StreamsConfig(start=start)), _Senders()
        _by_path(ctl, senders, 1, limited=limited)
        assert set(_by_path(ctl, senders, 8, rtt=0.15, limited=limited)) == {Action.HOLD}
        assert ctl.streams == start

# -- -P auto from the data path (docs/THIRDPARTY.md, "-P auto"; docs/PARALLEL.md) ---------------

def _path_auto(t0=100.0, rtt=0.05):
    """A copy's -P auto after its first report: 8 streams at 50 ms (10 Gbit/s over a 4 MiB cap)."""
    auto = PathStreams(StreamsConfig(max_streams=16), 4 * MiB)
    assert auto.update(t0, rtt, 0, 0) == 8
    return auto


def _path_run(auto, t0, rates, rtt=0.05, left=None, step=0.25, moved=0):
    """update every ``step`` seconds from t0, ``rates`` bytes/s in turn; the decisions."""
    out = []
    for i, rate in enumerate(rates, 1):
        moved += int(rate * step)
        out.append(auto.update(t0 + i * step, rtt, moved, 0, left))
    return out


def test_a_copy_starts_at_4_streams_and_waits_for_a_positive_data_path_rtt():
    auto = PathStreams(window_cap=4 * MiB)
    assert auto.streams == 4  # GridFTP's usual -p 4
    assert auto.update(0.0, 0.0, 0, 0) is None and auto.update(0.0, -1.0, 0, 0) is None
    assert auto.first_rtt is None
    auto.refused(4)  # (nothing asked yet: nothing to undo)
    assert auto.update(0.1, 0.1, 0, 0) == 8 and auto.first_rtt == 0.1


def test_the_path_controller_decides_once_an_interval_and_probes_after_four():
    """The interval is 4 RTTs, 0.25 s at least; the first probe waits 4 of them."""
    auto = _path_auto()
    assert _path_run(auto, 100.0, [4e6] * 4) == [None, None, None, 9]
    auto = _path_auto()
    half = _path_run(auto, 100.0, [4e6] * 8, step=0.125)  # every other look is inside an interval
    assert half == [None] * 7 + [9]


def test_a_path_rtt_above_its_least_is_a_queue_that_holds_the_probe():
    auto = _path_auto()  # least RTT 50 ms
    assert _path_run(auto, 100.0, [4e6] * 6, rtt=0.1, step=0.4) == [None] * 6  # 100 ms > 1.25 x 50 ms + 2 ms


def test_the_path_probe_is_judged_on_the_goodput_b_reports():
    """A stream must add max(5%, 50% / 8) = 6.25% (docs/PARALLEL.md, "-P auto")."""
    auto = _path_auto()
    assert _path_run(auto, 100.0, [4e6] * 8)[3:] == [9, None, None, None, 8]  # flat: given back
    auto = _path_auto()
    assert _path_run(auto, 100.0, [4e6] * 4 + [4.4e6] * 4)[3:] == [9, None, None, None, None]  # +10%: kept
    assert auto.streams == 9


def test_the_path_probes_only_while_the_rest_outlasts_its_judgment():
    """6 intervals: 4 to settle, 2 to judge."""
    auto = _path_auto()  # 4 MB/s: a second's bytes left is 4 intervals
    assert _path_run(auto, 100.0, [4e6] * 5, left=4_000_000) == [None] * 5
    auto = _path_auto()  # two seconds' is 8
    assert _path_run(auto, 100.0, [4e6] * 4, left=8_000_000)[-1] == 9
    auto = _path_auto()  # nothing moved: no rate to reckon the rest by
    assert _path_run(auto, 100.0, [0.0] * 4, left=8_000_000)[-1] == 9


def test_a_probe_the_source_refused_is_undone_and_the_next_waits_the_longest_backoff():
    auto = _path_auto()
    assert _path_run(auto, 100.0, [4e6] * 4) == [None, None, None, 9]
    auto.refused(8)  # what runs: the source kept its streams
    assert auto.controller is not None and auto.controller.streams == 8
    assert _path_run(auto, 101.0, [4e6] * 32, moved=4_000_000) == [None] * 31 + [9]  # 32 intervals


# -- the senders' figures (docs/decisions/0021-streams-that-share.md; tuning/sharing.py) ---------

def test_a_path_is_its_senders_least_rtt():
    assert from_infos([{"rtt": 120_000}, {"rtt": 90_000}]).rtt == 0.09


def test_senders_busy_and_never_limited_are_a_share_of_0_and_one_microsecond_busy_counts():
    m = LimitMeter()
    m.update(PathSample(0.1, 0, 1_000, 500))
    assert m.update(PathSample(0.1, 0, 2_000, 500)) == 0.0  # busy, no cap held them: congestion
    assert m.update(PathSample(0.1, 0, 2_001, 501)) == 1.0  # (microseconds: one is busy time)
