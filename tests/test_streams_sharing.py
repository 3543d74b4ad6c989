"""-P auto and -c auto that share the path (docs/decisions/0021-streams-that-share.md):
the senders' figures (tuning/count/sharing.py) and how they reach a receiving
client (DRS keys), the aggregate window of -P auto under DRS
(tuning/count/window.py), the streams count's and the fleet's give-back,
and the driver's side (client/streams/autosteer.py).  Each rule once."""

import itertools

import pytest

from drsftp.client.streams.autosteer import AutoSteering
from drsftp.ftp import drscmd, drsexchange
from drsftp.tuning.count.fleet import Change, FleetConfig, FleetController, Kind, Work
from drsftp.tuning.count.sharing import LimitMeter, PathSample, combine, from_infos, from_pairs, limit_pairs
from drsftp.tuning.count.streams import Action, StreamController, StreamSample, StreamsConfig
from drsftp.tuning.count.window import WindowedStreams, streams_controller

CAP = 4 << 20  # the host's per-socket window (wmem_max 4 MiB)
BASE = 0.1  # seconds
RATE = 100e6  # bytes/s
STEP = int(StreamsConfig().step_share * CAP)  # a first probe's step


# -- the senders' figures ------------------------------------------------------------

def test_a_senders_limited_times_are_its_drs_keys_and_a_session_sums_them():
    info = {"busy_time": 5_000_000, "rwnd_limited": 1_000_000, "sndbuf_limited": 250_000, "rtt": 100_000}
    pairs = limit_pairs(info)
    assert pairs == {"busy_us": 5_000_000, "rwnd_lim_us": 1_000_000, "sndbuf_lim_us": 250_000}
    assert limit_pairs({"rtt": 1}) == {}  # a kernel without the chronographs: nothing claimed
    assert drscmd.parse_args(drscmd.format_pairs(pairs)) == pairs
    with pytest.raises(drscmd.DRSArgumentError, match=r"busy_us=\d+ is out of range"):
        drscmd.parse_args(f"busy_us={1 << 51}")
    summed = drsexchange.session_report([{**pairs, "rtt_us": 100_000}, {**pairs, "rtt_us": 90_000}])
    assert summed["busy_us"] == 10_000_000 and summed["rwnd_lim_us"] == 2_000_000 and summed["rtt_us"] == 90_000


def test_the_path_is_the_senders_least_rtt_and_their_sums():
    p = from_pairs([{"rtt_us": 100_000, "retrans": 3, "busy_us": 10, "rwnd_lim_us": 4},
                    {"rtt_us": 120_000, "retrans": 1, "busy_us": 5, "sndbuf_lim_us": 1}])
    assert p == PathSample(0.1, 4, 15, 5)
    assert from_pairs([{"retrans": 1}, {}]) is None  # no RTT: a peer that reports nothing
    assert from_pairs([{"rtt_us": 100_000, "busy_us": 10}]) == PathSample(0.1, None, 10, None)  # unknown stays so
    q = from_infos([{"rtt": 90_000, "total_retrans": 2, "busy_time": 7, "rwnd_limited": 1, "sndbuf_limited": 2},
                    {"rtt": 0}])  # (a socket with no RTT yet)
    assert q == PathSample(0.09, 2, 7, 3)
    assert combine([p, None, q]) == PathSample(0.09, 6, 22, 8) and combine([None]) is None


def test_the_limited_share_is_per_interval_and_unknown_when_the_counters_go_back():
    m = LimitMeter()
    assert m.update(PathSample(0.1, 0, 1_000, 0)) is None  # the first figures: no interval yet
    assert m.update(PathSample(0.1, 0, 2_000, 600)) == pytest.approx(0.6)
    assert m.update(PathSample(0.1, 0, 2_000, 600)) is None  # not busy: nothing to share out
    assert m.update(PathSample(0.1, 0, 1_500, 100)) is None  # a connection ended and left the sums
    assert m.update(PathSample(0.1, 0, 3_500, 2_600)) == 1.0
    assert m.update(None) is None and m.update(PathSample(0.1, 0, 9_000, 9_000)) is None


class Senders:
    """Cumulative sender figures: ``limited`` of each interval's busy time capped."""

    def __init__(self) -> None:
        self.busy = self.limited = 0

    def __call__(self, rtt: float = BASE, limited: float = 0.5, retransmits: int = 0) -> PathSample:
        self.busy += 1_000_000
        self.limited += int(limited * 1_000_000)
        return PathSample(rtt, retransmits, self.busy, self.limited)


# -- the streams count (no window: a tuning without DRS) -------------------------------

def test_the_count_gives_the_last_stream_back_to_a_queue_that_no_buffer_cap_explains():
    ctl, path = StreamController(StreamsConfig(start=4, settle=2, judge=2)), Senders()
    acts = [ctl.update(RATE, [], path=path(rtt=rtt, limited=0.05)) for rtt in (BASE, 0.15, 0.15, 0.15)]
    assert acts == [Action.HOLD, Action.HOLD, Action.REMOVE, Action.HOLD] and ctl.streams == 3  # two queued
    # held by their caps in the same queue: no stream taken back, none added
    ctl, path = StreamController(StreamsConfig(start=4, settle=2, judge=2)), Senders()
    ctl.update(RATE, [], path=path())
    assert {ctl.update(RATE, [], path=path(rtt=0.15, limited=0.9)) for _ in range(10)} == {Action.HOLD}
    # a peer that reports nothing: as before, a queue only holds the probes
    ctl = StreamController(StreamsConfig(start=4, settle=2, judge=2))
    queued = [StreamSample(0.15, 0.1)]
    assert {ctl.update(RATE, queued) for _ in range(10)} == {Action.HOLD}


def test_not_limited_is_no_bar_to_a_probe_of_the_count():
    """A sender held by its own send buffer reads as not limited (Linux keeps
    tcpi_sndbuf_limited at 0: tuning/count/sharing.py): the count still probes."""
    for share in (0.05, 0.5):
        ctl, path = StreamController(StreamsConfig(start=2, settle=2)), Senders()
        assert [ctl.update(RATE, [], path=path(limited=share)) for _ in range(2)][-1] is Action.ADD


# -- the aggregate window (DRS) -------------------------------------------------------------

def windowed(**kw) -> WindowedStreams:
    cfg = dict(start=8, window_cap=CAP, settle=2, judge=2, probe_judge=2, max_backoff=8)
    cfg.update(kw)
    return WindowedStreams(StreamsConfig(**cfg))


def drained(ctl: WindowedStreams, path: Senders, rate: float = RATE) -> None:
    """The start (no probe: no cap holds the senders), ended by a queue
    that stays: the window drained to rate x base RTT."""
    ctl.update(rate, [], path=path(rtt=BASE, limited=0.05))
    ctl.update(rate, [], path=path(rtt=0.13, limited=0.05))
    assert ctl.update(rate, [], path=path(rtt=0.13)) is Action.HOLD and ctl.window == int(rate * BASE)


def test_the_start_runs_its_streams_at_their_cap_and_probes_with_a_whole_stream_once_the_pipe_is_full():
    ctl, path = windowed(start=3), Senders()
    assert ctl.stream_window is None and ctl.window is None
    # the goodput still grows by a quarter over two intervals: slow start fills the pipe
    assert {ctl.update(r, [], path=path()) for r in (10e6, 20e6, 40e6, 80e6)} == {Action.HOLD}
    acts = [ctl.update(RATE, [], path=path()) for _ in range(2)]  # 80, 100, 100: full
    assert acts == [Action.HOLD, Action.ADD] and ctl.streams == 4 and ctl.window is None


def test_the_start_does_not_drain_while_its_goodput_grows_in_a_queue_another_flow_made():
    ctl, path = windowed(), Senders()
    ctl.update(10e6, [], path=path(limited=0.05))
    for r in (20e6, 40e6, 80e6):
        ctl.update(r, [], path=path(rtt=0.15, limited=0.05))
    assert ctl.window is None
    ctl.update(90e6, [], path=path(rtt=0.15, limited=0.05))  # 90 > 1.25 x 40
    assert ctl.window is None
    ctl.update(90e6, [], path=path(rtt=0.15, limited=0.05))  # 90 < 1.25 x 80: the pipe is full
    assert ctl.window == int(90e6 * BASE)


def test_the_first_queue_that_stays_drains_the_window_to_what_the_path_delivers():
    ctl, path = windowed(), Senders()
    ctl.update(RATE, [], path=path(limited=0.05))
    ctl.update(RATE, [], path=path(rtt=0.13, limited=0.05))  # one interval: a burst, no cut
    assert ctl.window is None
    ctl.update(1.2 * RATE, [], path=path(rtt=0.13))  # two running
    assert ctl.window == int(1.2 * RATE * BASE)  # the best interval x the base RTT
    assert ctl.streams == 8 and ctl.stream_window == int(1.2 * RATE * BASE) // 8  # the streams stay, capped


def test_the_streams_stay_under_a_smaller_window_each_with_its_share():
    ctl, path = windowed(), Senders()
    drained(ctl, path)  # 10 MB, 3 streams' caps: the 8 stay (a stream given back would cost
    for _ in range(12):  # its siblings some BBR cycles to take its share over)
        assert ctl.update(RATE, [], path=path(limited=0.05)) is Action.HOLD
    assert ctl.streams == 8 and ctl.stream_window == int(RATE * BASE) // 8


def test_one_rtt_below_the_paths_own_does_not_lower_the_base():
    ctl, path = windowed(), Senders()
    for rtt in (BASE, 0.09, BASE, 0.104, 0.104, 0.104):  # a 90 ms sample alone: the base stays 100 ms
        ctl.update(RATE, [], path=path(rtt=rtt, limited=0.05))
        assert ctl.climb.queued_for == 0  # and 104 ms is no queue over it
    assert ctl._base == BASE


def test_a_probe_that_carries_its_step_is_kept():
    ctl, path = windowed(), Senders()
    drained(ctl, path)
    w = ctl.window
    ctl.update(RATE, [], path=path())
    assert ctl.update(RATE, [], path=path()) is Action.HOLD and ctl.window == w + STEP  # the probe
    expected = STEP / BASE
    for _ in range(3):  # judged by the last 2 of 3 (settle 2)
        ctl.update(RATE + 0.6 * expected, [], path=path())
    assert ctl.window == w + STEP and ctl._probe is None and ctl.climb.backoff == 2  # kept, the wait reset


def test_a_kept_probe_that_leaves_a_standing_queue_is_trimmed_at_once_but_not_below_the_window_before_it():
    """It carried half its step or more, but the median RTT of its judged
    intervals is past the trim's mark (104 ms): the step passed the room
    nobody uses, and the flows beside pay for the queue until the trim."""
    ctl, path = windowed(probe_judge=4, settle=2), Senders()
    drained(ctl, path)
    w = ctl.window
    ctl.update(RATE, [], path=path())
    ctl.update(RATE, [], path=path())  # the probe
    assert ctl.window == w + STEP
    expected = STEP / BASE
    for _ in range(5):  # judged by the median of 4, settle - 1 after it
        ctl.update(RATE + 0.8 * expected, [], path=path(rtt=0.106))
    assert ctl._probe is None and ctl.window == max(w, int((w + STEP) * BASE / 0.106))
    assert ctl._streak == 0  # the next step is not doubled
    ctl, path = windowed(probe_judge=4, settle=2), Senders()
    drained(ctl, path)
    ctl.update(RATE, [], path=path())
    ctl.update(RATE, [], path=path())
    for _ in range(5):
        ctl.update(RATE + 0.8 * expected, [], path=path(rtt=0.111))  # under the queue mark (112 ms)
    assert ctl.window == w  # x 100/111 would fall below the window before it


def test_a_probe_that_took_from_flows_beside_it_falls_below_what_the_path_gave_by_the_headroom():
    ctl, path = windowed(), Senders()
    drained(ctl, path)
    w = ctl.window
    ctl.update(RATE, [], path=path())
    ctl.update(RATE, [], path=path())  # the probe
    got = RATE + 0.3 * (STEP / BASE)  # a third of its step: others lost the rest of what it gained
    for _ in range(3):
        ctl.update(got, [], path=path())
    assert ctl.window == int(0.85 * got * BASE) < w and ctl.climb.backoff == 4  # the next probe waits twice as long


def test_a_probe_that_carried_nothing_gives_its_step_back():
    ctl, path = windowed(), Senders()
    drained(ctl, path)
    w = ctl.window
    for _ in range(5):  # the probe at the second, judged three later
        ctl.update(RATE, [], path=path())
    assert ctl.window == w and ctl.climb.backoff == 4


def test_a_queue_that_stays_cuts_the_window_by_the_headroom_down_to_one_stream_at_its_cap():
    ctl, path = windowed(), Senders()
    drained(ctl, path, rate=60e6)  # 6 MB
    windows = []
    for _ in range(20):
        ctl.update(60e6, [], path=path(rtt=0.13))
        windows.append(ctl.window)
    assert windows[2] == int(0.85 * 6_000_000)
    assert min(windows) == CAP and ctl.streams >= 1  # never below one stream at its cap


def test_no_probe_while_our_window_does_not_hold_the_senders_or_the_path_loses_packets():
    ctl, path = windowed(), Senders()
    drained(ctl, path)
    w = ctl.window
    assert {ctl.update(RATE, [], path=path(limited=0.05)) for _ in range(6)} == {Action.HOLD} and ctl.window == w
    ctl.update(RATE, [], path=path(limited=0.5))
    assert ctl.window == w + STEP  # held by the window: the probe
    # at the start, at the host's caps, a sender held by its own buffer reads as not limited: probes go on
    ctl, path = windowed(start=3), Senders()
    assert [ctl.update(RATE, [], path=path(limited=0.0)) for _ in range(3)][-1] is Action.ADD
    ctl, path = windowed(start=3), Senders()
    assert {ctl.update(RATE, [], path=path(retransmits=i)) for i in range(6)} == {Action.HOLD}
    ctl = windowed(start=3)  # a peer that reports nothing: the streams' own figures, probes allowed
    assert [ctl.update(RATE, [StreamSample(BASE, BASE)]) for _ in range(3)][-1] is Action.ADD


def test_a_driver_that_cannot_change_its_streams_keeps_them_and_has_its_windows_steered():
    ctl, path = windowed(), Senders()
    drained(ctl, path)
    ctl.refused(Action.REMOVE, running=8)
    assert ctl.fixed and ctl.streams == 8
    for _ in range(40):
        ctl.update(RATE, [], path=path(limited=0.05))
    assert ctl.streams == 8 and ctl.stream_window == int(RATE * BASE) // 8


def test_the_window_is_each_streams_share_and_none_once_it_fills_their_caps():
    ctl = windowed(start=2)
    ctl.window = 3 * CAP
    assert ctl.stream_window is None  # 2 streams cannot hold it: each at its cap
    ctl.streams = 4
    assert ctl.stream_window == 3 * CAP // 4


def test_auto_runs_the_window_where_a_streams_window_can_be_capped():
    assert isinstance(streams_controller(StreamsConfig(window_cap=CAP)), WindowedStreams)
    assert type(streams_controller(StreamsConfig())) is StreamController
    with pytest.raises(ValueError):
        WindowedStreams(StreamsConfig())


# -- the fleet (-c auto) ----------------------------------------------------------------

def test_the_fleet_gives_back_a_big_files_stream_then_sessions_to_a_queue_no_cap_explains():
    ctl, path = FleetController(FleetConfig(start_sessions=6, settle=2, judge=2, session_settle=2)), Senders()
    ctl.start_file("big", 3)
    work = Work(queued_files=10, queued_bytes=1, big_left={"big": 1 << 30}, bytes_left=2 << 30)
    ctl.update(RATE, [], work, path())
    changes = [ctl.update(RATE, [], work, path(rtt=0.15, limited=0.05)) for _ in range(20)]
    got = [c for c in changes if c is not None]
    assert got[:2] == [Change(Kind.STREAM, -1, "big")] * 2  # the file's streams first, down to one
    assert got[2:] == [Change(Kind.SESSION, -2), Change(Kind.SESSION, -2), Change(Kind.SESSION, -1)]  # x2/3: 6, 4, 2, 1
    assert ctl.sessions == 1 and ctl.streams["big"] == 1  # and no further


# -- the driver's side --------------------------------------------------------------

class Driver:
    def __init__(self, refuse_after: int = 99) -> None:
        self.calls, self.windows, self.left = [], [], refuse_after

    def add_stream(self) -> bool:
        return self._do("add")

    def remove_stream(self) -> bool:
        return self._do("remove")

    def _do(self, what: str) -> bool:
        self.left -= 1
        self.calls.append(what)
        return self.left >= 0

    def path_sample(self) -> PathSample:
        return PathSample(BASE, 0, 1, 1)

    def cap_windows(self, per_stream) -> None:
        self.windows.append(per_stream)


class Decides:
    """A controller that moves to the streams and window it is given."""

    def __init__(self, streams: int) -> None:
        self.streams, self.stream_window, self.plan, self.paths, self.refusals = streams, None, [], [], []

    def update(self, goodput, samples, intervals_left=None, path=None):
        self.paths.append(path)
        self.streams, self.stream_window = self.plan.pop(0)
        return Action.HOLD

    def refused(self, action, running=None):
        self.refusals.append((action, running))
        self.streams = running


def test_steering_applies_a_cut_of_several_streams_one_connection_at_a_time_and_each_window():
    ctl, d = Decides(8), Driver()
    steer = AutoSteering(ctl, d)
    ctl.plan = [(3, 1_000_000), (3, 1_000_000), (4, None)]
    assert steer.update(1.0, [], None) and d.calls == ["remove"] * 5 and d.windows == [1_000_000]
    assert not steer.update(1.0, [], None) and d.windows == [1_000_000] * 2  # again: streams that joined since
    assert steer.update(1.0, [], None) and d.calls[-1] == "add" and d.windows[-1] is None  # uncapped once
    assert ctl.paths[0] == PathSample(BASE, 0, 1, 1)


def test_steering_stops_at_a_refusal_and_tells_the_controller_how_many_run():
    ctl, d = Decides(8), Driver(refuse_after=2)
    steer = AutoSteering(ctl, d)
    ctl.plan = [(3, None)]
    steer.update(1.0, [], None)
    assert d.calls == ["remove"] * 3 and ctl.refusals == [(Action.REMOVE, 6)] and steer.applied == 6


def test_a_gets_path_is_the_servers_report_and_a_puts_has_no_buffer_test():
    """A get's senders are the server's (its DRS reply); a put's are our
    own sockets, whose window is our send buffer, a limit Linux does not
    count: the put's buffer test is left out (unknown), its RTT kept."""
    from types import SimpleNamespace

    from drsftp.client.streams.modee.base import ModeESession
    from drsftp.tuning import Role

    info = {"rtt": 100_000, "total_retrans": 2, "busy_time": 10, "rwnd_limited": 0, "sndbuf_limited": 0}
    stream = SimpleNamespace(ended=None, tuner=SimpleNamespace(last_info=info))
    put = ModeESession.__new__(ModeESession)
    put.role, put.opened = Role.SENDER, [stream]
    assert put.path_sample() == PathSample(0.1, 2, None, None)
    get = ModeESession.__new__(ModeESession)
    get.role, get.opened = Role.RECEIVER, [stream]
    get.drs = SimpleNamespace(exchange=SimpleNamespace(peer_last={"rtt_us": 90_000, "busy_us": 5, "rwnd_lim_us": 4}))
    assert get.path_sample() == PathSample(0.09, None, 5, 4)


def test_a_standing_queue_under_the_queue_mark_is_trimmed_to_the_window_it_would_take_without_it():
    """Beside a flow held by its own window, a window past the room nobody
    uses keeps a few ms of queue: under the queue mark (110 ms + 2 ms), yet
    the other flow loses rate to it.  The median of the last four intervals
    since a change above 102 ms + 2 ms: the window x 100 / that median; at
    103.5 ms, or one interval's burst among four, nothing."""
    ctl, path = windowed(probe_judge=4), Senders()
    drained(ctl, path)
    w = ctl.window
    for _ in range(6):
        ctl.update(RATE, [], path=path(rtt=0.1035, limited=0.05))
    assert ctl.window == w
    for rtt in (0.111, 0.1035, 0.100, 0.1035, 0.100, 0.107):  # a probe's or a neighbour's burst
        ctl.update(RATE, [], path=path(rtt=rtt, limited=0.05))
        assert ctl.window == w  # medians 103.5 ms with the burst, then 101.75 ms
    ctl.update(RATE, [], path=path(rtt=0.107, limited=0.05))
    assert ctl.window == int(w * BASE / 0.10525)  # 103.5, 100, 107, 107: 105.25 ms
    assert ctl.climb.queued_for == 0  # (no queue by the cut's mark)
    for _ in range(3):
        ctl.update(RATE, [], path=path(rtt=0.108, limited=0.05))
    assert ctl.window == int(w * BASE / 0.10525)  # the intervals before the trim count no more


def test_a_trim_is_at_most_a_headroom_and_never_below_one_stream_at_its_cap():
    ctl, path = windowed(), Senders()
    drained(ctl, path, rate=60e6)  # 6 MB
    windows = []
    for _ in range(12):
        ctl.update(60e6, [], path=path(rtt=0.111, limited=0.05))
        windows.append(ctl.window)
    assert min(windows) == CAP  # 6 MB x 100/111 ... down to one stream's cap
    assert all(b >= 0.85 * a for a, b in itertools.pairwise(windows))
