"""The DRS floor that follows a slow path (drsftp/tuning/slowfloor.py;
docs/DESIGN.md#drs-clamp), against a fluid model of one bottleneck."""

import dataclasses
import itertools

from drsftp.tuning import DRSConfig, DRSTuning, Role, Sample
from drsftp.tuning.slowfloor import SlowFloor

KiB = 1024
CLOCK = itertools.count(0.0, 2.0)  # a hold (1 s) between the rule's calls


class Bottleneck:
    """A drop-tail-free bottleneck of ``rate`` bytes/s and base RTT ``base``.
    The DRS flow's flight is the smaller of its sender's cwnd and the
    receiver's window; ``other`` bytes stand queued for another flow, so
    the DRS flow's share is its flight over all the queued bytes."""

    def __init__(self, tuning, *, rate, base, cwnd, other=0.0):
        self.tuning, self.rate, self.base, self.cwnd, self.other = tuning, rate, base, cwnd, other
        self.t, self.bytes = 0.0, 0.0
        self.rates: list[float] = []
        tuning.on_sample(Sample(bytes_received=0), now=0.0, rtt=base)

    def run(self, seconds):
        end = self.t + seconds
        while self.t < end:
            flight = min(self.cwnd, self.tuning.window)
            pipe = self.rate * self.base
            queued = max(flight + self.other - pipe, 0.0)
            rtt = self.base + queued / self.rate
            share = flight / (flight + self.other)
            got = min(flight / rtt, self.rate * share)
            dt = min(max(rtt / 2, 0.01), 0.25)  # the driver's ticks (DRSTuning.tick_interval)
            self.t += dt
            self.bytes += got * dt
            self.rates.append(got)
            whole = int(self.bytes // 1448 * 1448)  # whole segments: few a tick on a slow path
            self.tuning.on_sample(Sample(bytes_received=whole), now=self.t, rtt=rtt)
        return self.tuning.window


def receiver(**cfg):
    return DRSTuning(Role.RECEIVER, DRSConfig(**cfg))


def test_a_slow_path_alone_brings_the_floor_down_to_a_few_bdp_and_keeps_the_rate():
    """56 kbit/s, 100 ms (the kernel paper's case, sec. V.B): a reno-like
    sender with a 27 KiB cwnd fills the queue; the floor falls from 256 KiB
    to about 4 x rate x base RTT, and the flow still moves the line rate."""
    drs = receiver()
    link = Bottleneck(drs, rate=7000.0, base=0.1, cwnd=27 * KiB)
    window = link.run(200.0)
    assert 8 * 1448 <= window <= 13 * KiB  # the paper's DRS stayed under 13 KB
    assert not drs._slow.locked
    assert min(link.rates[-50:]) >= 0.99 * 7000.0  # the pipe stays full


def test_no_queue_seen_keeps_the_fixed_floor():
    """A flight under the BDP never inflates the RTT: the pipe was never
    seen full, so nothing says what the path carries."""
    drs = receiver()
    link = Bottleneck(drs, rate=7000.0, base=0.1, cwnd=500)
    assert link.run(200.0) == DRSConfig.floor and not drs.queue_seen


def test_the_floor_stops_at_eight_segments():
    drs = receiver()
    link = Bottleneck(drs, rate=700.0, base=0.1, cwnd=27 * KiB)  # 5.6 kbit/s: 4 BDP is 280 bytes
    assert 8 * 1448 <= link.run(600.0) <= 8 * 1448 * 17 / 16  # (smaller changes are not applied)


def test_beside_a_standing_queue_another_flow_keeps_the_floor_does_not_spiral():
    """1 Mbit/s, 100 ms, another flow keeps 200 KB queued: DRS's rate is its
    flight's share of the queue, so a floor in proportion to the rate would
    fall with it to eight segments.  The guard sees the rate fall with the
    floor and returns the fixed floor."""
    drs = receiver()
    link = Bottleneck(drs, rate=125e3, base=0.1, cwnd=100 * KiB, other=200e3)
    link.run(600.0)
    assert drs._slow.locked
    assert drs.window == DRSConfig.floor
    smallest = min(drs._slow.value, drs.window)
    assert smallest >= 8 * 1448
    # the flow ends at its cwnd-limited share, as with the fixed floor
    fixed = Bottleneck(receiver(slow_floor_keep=0.0, slow_floor_gain=1e9), rate=125e3, base=0.1,
                       cwnd=100 * KiB, other=200e3)
    fixed.run(600.0)
    assert link.rates[-1] >= 0.99 * fixed.rates[-1]


def test_the_spiral_would_happen_without_the_guard():
    """The same link with the guard off: the floor does fall to eight segments,
    and the rate with it (what the guard is for)."""
    drs = receiver(slow_floor_keep=0.0)
    link = Bottleneck(drs, rate=125e3, base=0.1, cwnd=100 * KiB, other=200e3)
    link.run(600.0)
    assert drs.window <= 8 * 1448 * 17 / 16
    assert link.rates[-1] < 0.2 * link.rates[0]


def test_a_standing_queue_that_comes_later_returns_the_fixed_floor():
    drs = receiver()
    link = Bottleneck(drs, rate=125e3, base=0.1, cwnd=100 * KiB)
    assert link.run(120.0) < 64 * KiB  # alone: the floor followed the path down
    link.other = 200e3
    link.run(300.0)
    assert drs._slow.locked and drs.window == DRSConfig.floor


def test_fast_paths_keep_the_fixed_floor():
    """100 Mbit/s, 100 ms with a queue: 4 x BDP is 5 MB, far above 256 KiB:
    the floor never moves."""
    drs = receiver()
    link = Bottleneck(drs, rate=12.5e6, base=0.1, cwnd=2.5e6)
    link.run(60.0)
    assert drs._slow.value == DRSConfig.floor and drs.window >= DRSConfig.floor


def floor_rule():
    return SlowFloor(256 * KiB, gain=4.0, least=11584, keep=0.75, delay=0.025, step=0.75, threshold=1 / 16,
                     filled=0.8)


def tick(f, rate, *, bound=True, holes=False, base=0.5, now=None):
    """One call of the rule, a hold (1 s) after the last: ``bound``, the
    window at the floor and the flight filling it, or both far above."""
    window, flight = (f.value, f.value) if bound else (2 * f.value, 0.1 * f.value)
    now = next(CLOCK) if now is None else now
    return f.update([(0.0, flight, rate)] * 8, int(window), base, 0.75, holes=holes, now=now, hold=1.0)


def test_the_rule_in_numbers():
    """The floor itself: at most one shrink step per call, never above the
    fixed floor, locked when a judged rate stays below keep x the best for
    a hold."""
    f = floor_rule()
    assert tick(f, 7000.0, bound=False) == int(256 * KiB * 0.75)
    for _ in range(40):
        tick(f, 7000.0)
    assert f.value == 4.0 * 7000.0 * 0.5 and not f.locked
    assert tick(f, 6000.0) < 4.0 * 7000.0 * 0.5  # a lower rate: a lower floor
    assert not f.locked
    assert tick(f, 5000.0, bound=False) < 256 * KiB  # not at the floor: not judged
    assert tick(f, 5000.0) == 12000  # 5000 < 0.75 x 7000: short of the mark ...
    assert tick(f, 5000.0) == 256 * KiB  # ... for a whole hold
    assert f.locked and tick(f, 7000.0) == 256 * KiB
    assert tick(floor_rule(), 12.5e6, base=0.001) == 256 * KiB  # 4 x 12.5 MB/s x 25 ms


def test_at_the_flight_the_floor_steps_once_a_hold():
    """Where the flight fills the floor, each step down is judged over a
    whole hold before the next: a step that cost rate is one step."""
    f = floor_rule()
    first = tick(f, 7000.0)
    assert first == int(256 * KiB * 0.75)
    same = tick(f, 7000.0, now=next(CLOCK) - 1.5)
    assert same == first  # half a hold later: no second step
    assert tick(f, 7000.0) == int(256 * KiB * 0.75 * 0.75)


def test_an_idle_sender_never_lowers_the_floor():
    """No bytes with an inflated RTT (the last sample kept while the sender
    pauses): a nil rate says nothing about the path, and a hold with a
    stalled tick or a repaired hole neither lowers nor locks the floor."""
    f = floor_rule()
    for _ in range(20):
        assert tick(f, 0.0) == 256 * KiB
        assert tick(f, 7000.0, holes=True) == 256 * KiB
    assert not f.locked and f.best == 0
    drs = receiver()
    link = Bottleneck(drs, rate=7000.0, base=0.1, cwnd=27 * KiB)
    low = link.run(200.0)
    link.rate, link.cwnd = 1e-3, 1e-3  # the sender stops
    link.run(120.0)
    assert low <= drs.window < 16 * KiB and not drs._slow.locked


def test_a_hole_is_not_the_floor_costing_rate():
    """A loss stalls the in-order bytes for a round trip or two; with the
    out-of-order count growing, the floor does not take the stall for its
    own doing."""
    drs = receiver()
    link = Bottleneck(drs, rate=7000.0, base=0.1, cwnd=27 * KiB)
    low = link.run(200.0)
    t, done = link.t, int(link.bytes // 1448 * 1448)
    for i in range(40):  # 10 s of nothing in order, out-of-order packets arriving
        t += 0.25
        drs.on_sample(Sample(bytes_received=done, out_of_order=i + 1), now=t, rtt=1.2)
    assert not drs._slow.locked and drs.window <= low * 17 / 16


def test_a_stall_shorter_than_a_hold_is_no_cost():
    f = floor_rule()
    for _ in range(3):
        tick(f, 7000.0)
    below = f.value
    assert tick(f, 1000.0) == int(below)  # a hole's stall ...
    assert tick(f, 7000.0) < below and not f.locked  # ... repaired within the hold


def test_holes_stop_the_fall_but_not_the_judgement():
    """Beside other flows' drops few holds pass without a hole: a burst
    neither lowers the floor nor raises its best, but a rate that fell
    with the floor still returns the fixed one."""
    f = floor_rule()
    for _ in range(3):
        tick(f, 7000.0)
    below = f.value
    assert tick(f, 9000.0, holes=True) == int(below) and f.best == 7000.0
    tick(f, 4000.0, holes=True)
    assert tick(f, 4000.0, holes=True) == 256 * KiB and f.locked


# -- the rule's boundaries, on the floor alone (docs/DESIGN.md#drs-clamp: 4 x the held rate x
# the base RTT, 25 ms at least, within [eight segments, 256 KiB]; a flight of 80% of the floor
# fills it, a window within 1/16 of it is at it; below 2/3 of the best rate for a whole hold
# the floor goes back to 256 KiB; at the flight one 0.75 step a hold, above it one per RTT)

FIXED, BASE, HOLD = 256 * KiB, 0.1, 0.5  # bytes, seconds, seconds


def bare_floor():
    return SlowFloor(FIXED, gain=4.0, least=8 * 1448, keep=2 / 3, delay=0.025, step=0.75,
                     threshold=1 / 16, filled=0.8)


def held_tick(floor, now, rates, window, flights=None):
    """The floor after a tick whose hold saw ``rates`` (bytes/s) and ``flights`` (bytes per RTT)."""
    flights = flights or [float(FIXED)] * len(rates)
    kept = [(now, f, r) for f, r in zip(flights, rates, strict=True)]
    return floor.update(kept, window, BASE, 0.75, holes=False, now=now, hold=HOLD)


def test_above_the_flight_the_floor_falls_a_step_per_rtt_at_it_one_a_hold():
    away = bare_floor()  # the window 1.5x the floor: not at it
    assert held_tick(away, 1.0, [3e5] * 4, 3 * FIXED // 2) == 196608
    assert held_tick(away, 1.1, [3e5] * 4, 3 * FIXED // 2) == 147456
    at = bare_floor()  # at the floor (within 1/16) and one tick's flight filling it
    flights = [1e5, 1e5, 1e5, 0.8 * FIXED]
    assert held_tick(at, 1.0, [3e5] * 4, 278528, flights) == 196608  # 256 KiB x 17/16: at it
    assert held_tick(at, 1.1, [3e5] * 4, 208896, [1e5, 1e5, 1e5, 0.8 * 196608]) == 196608  # within the hold
    assert held_tick(at, 1.5, [3e5] * 4, 196608) == 147456  # a whole hold on


def test_a_tick_without_bytes_in_the_hold_moves_neither_the_floor_nor_its_best():
    floor = bare_floor()
    assert held_tick(floor, 1.0, [3e5, 3e5, 0.0, 3e5], FIXED) == FIXED and floor.best == 0.0


def test_the_first_step_at_the_flight_is_taken_at_once_after_the_fixed_floor():
    floor = bare_floor()
    assert held_tick(floor, 1.0, [7e5] * 4, FIXED) == FIXED  # 4 x 700 kB/s x 0.1 s: past 256 KiB
    assert held_tick(floor, 1.1, [6e5] * 4, FIXED) == 240000  # 4 x 600 kB/s x 0.1 s, at once


def test_a_rate_short_at_the_fixed_floor_is_not_the_floors_doing():
    floor = bare_floor()
    held_tick(floor, 1.0, [7e5] * 4, FIXED)
    for now in (1.1, 1.6, 2.1):  # under 2/3 of 700 kB/s for over a hold, the floor never lowered
        assert held_tick(floor, now, [3e5] * 4, FIXED) == FIXED
    assert not floor.locked and held_tick(floor, 2.2, [6e5] * 4, FIXED) == 240000


def test_a_rate_of_exactly_two_thirds_of_the_best_holds():
    floor = bare_floor()
    assert held_tick(floor, 1.0, [3e5] * 4, FIXED) == 196608
    assert held_tick(floor, 1.5, [2e5] * 4, 196608) == 147456  # not below 2/3 of 300 kB/s: a step


def test_a_shortfall_of_one_whole_hold_returns_the_fixed_floor():
    floor = bare_floor()
    assert held_tick(floor, 1.0, [3e5] * 4, FIXED) == 196608
    assert held_tick(floor, 2.0, [1e5] * 4, 196608) == 196608  # short from here ...
    assert held_tick(floor, 2.5, [1e5] * 4, 196608) == FIXED and floor.locked  # ... one hold on


def test_drs_sizes_its_floor_by_the_documented_rule():
    """docs/DESIGN.md#drs-clamp: 4 x the held rate x the base RTT (25 ms at
    least), eight 1448-byte segments at least, while the rate stays above 2/3
    of its best; one 0.75 shrink step; at the floor within 1/16, filled at 80%."""
    slow = DRSTuning(Role.RECEIVER)._slow
    assert (slow.fixed, slow.gain, slow.least, slow.delay) == (256 * KiB, 4.0, 11584, 0.025)
    assert (slow.keep, slow.step, slow.threshold, slow.filled) == (2 / 3, 0.75, 1 / 16, 0.8)


def test_drs_lets_the_floor_fall_one_shrink_step_an_rtt_at_most():
    """56 kbit/s, 100 ms: from 256 KiB the floor falls over many ticks, none
    of them by more than the 0.75 step of a whole RTT."""
    drs = receiver()
    link = Bottleneck(drs, rate=7000.0, base=0.1, cwnd=64 * KiB)
    floors = []
    update = drs._slow.update

    def watched(*args, **kw):
        floors.append(update(*args, **kw))
        return floors[-1]

    drs._slow.update = watched
    link.run(60.0)
    falls = [b / a for a, b in itertools.pairwise(floors) if b < a]
    assert len(falls) > 20 and min(falls) >= 0.75 and floors[-1] < 64 * KiB


def test_holes_beside_a_full_queue_hold_the_floor():
    """A hole each tick, each with the RTT inflated (drops at a full queue:
    no recovery room, docs/decisions/0004-ungated-recovery-room.md): over a
    hold with a hole the floor neither falls nor raises its best."""
    drs = receiver()
    link = Bottleneck(drs, rate=7000.0, base=0.1, cwnd=64 * KiB)
    on_sample, holes = drs.on_sample, itertools.count()

    def with_holes(sample, **kw):
        return on_sample(dataclasses.replace(sample, out_of_order=next(holes)), **kw)

    drs.on_sample = with_holes
    link.run(60.0)
    # (the first measured tick has no count before it: one step at the flight, then none)
    assert drs.queue_seen and drs._slow.value == 0.75 * 256 * KiB
