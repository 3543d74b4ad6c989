"""The DRS controller and the other strategies, with a fake clock."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from drsftp.tuning import (
    Decision,
    DRSConfig,
    DRSTuning,
    FixedTuning,
    PeerReport,
    Role,
    Sample,
    Tuning,
    create,
    names,
    parse_size,
)

KiB, MiB = 1024, 1024 * 1024


class FakeLink:
    """Feeds a receiver-side DRS controller bytes as a sender with a given
    per-RTT flight would deliver them, ticking every half RTT."""

    def __init__(self, tuning, rtt=0.1):
        self.t = 0.0
        self.bytes = 0
        self.rtt = rtt
        self.tuning = tuning
        tuning.on_sample(Sample(bytes_received=0), now=0.0, rtt=rtt)  # the driver ticks at attach

    def run(self, flight_per_rtt, rtts=1, rtt=None):
        rtt = rtt or self.rtt
        for _ in range(int(rtts * 2)):
            self.t += rtt / 2
            self.bytes += int(flight_per_rtt / 2)
            self.tuning.on_sample(Sample(bytes_received=self.bytes), now=self.t, rtt=rtt)
        return self.tuning.window


def receiver(**cfg):
    return DRSTuning(Role.RECEIVER, DRSConfig(**cfg))


def test_slow_start_window_stays_twice_the_doubling_flight():
    drs = receiver(floor=64 * KiB, cap=256 * MiB)
    link = FakeLink(drs)
    flight = 64 * KiB
    for _ in range(8):
        window = link.run(flight)
        assert drs.slow_start
        assert window >= 1.9 * flight  # never limits a doubling sender
        flight *= 2


def test_additive_phase_uses_headroom_not_doubling():
    drs = receiver(floor=64 * KiB)
    link = FakeLink(drs)
    for flight in (128 * KiB, 256 * KiB, 512 * KiB, 1 * MiB):
        link.run(flight)
    for i in range(10):  # additive increase: +1 MSS per RTT
        window = link.run(1 * MiB + i * 1448)
    assert not drs.slow_start
    assert 1.2 * MiB <= window <= 1.35 * MiB


def test_window_never_exceeds_cap_or_falls_below_floor():
    drs = receiver(floor=128 * KiB, cap=2 * MiB)
    link = FakeLink(drs)
    assert link.run(0, rtts=3) == 128 * KiB
    # a flat flight is additive growth: +25 % per RTT until the cap, then stop
    assert link.run(50 * MiB, rtts=16) == 2 * MiB


def test_shrinks_gradually_only_after_a_sustained_drop():
    drs = receiver(floor=64 * KiB, hold_periods=4, shrink_step=0.75)
    link = FakeLink(drs)
    for flight in (256 * KiB, 512 * KiB, 1 * MiB, 2 * MiB):
        link.run(flight)
    for _ in range(4):
        peak_window = link.run(2 * MiB)
    # multiplicative decrease: the flight halves
    after_one = link.run(1 * MiB)
    assert after_one == peak_window  # the peak is held for hold_periods
    windows = [link.run(1 * MiB) for _ in range(12)]
    assert windows[-1] < peak_window
    for before, after in zip([after_one] + windows, windows):
        assert after >= int(before * 0.75) - 1  # at most one step per period
    assert windows[-1] == pytest.approx(1.25 * MiB, rel=0.07)


def test_rtt_inflation_stops_runaway_growth():
    """docs/DESIGN.md#kf-queue-runaway: a filling queue inflates the RTT; 2x the measurement
    would keep growing.  The guard holds the window near 2 x rate x min_rtt."""
    rate = 12.5e6  # bytes/s, 100 Mbit/s
    drs = receiver(floor=64 * KiB, cap=1 << 30)
    link = FakeLink(drs, rtt=0.1)
    link.run(rate * 0.1, rtts=4, rtt=0.1)
    rtt = 0.1
    for _ in range(60):  # the queue grows, the RTT inflates to 3x
        rtt = min(rtt * 1.05, 0.3)
        link.run(rate * rtt, rtts=1, rtt=rtt)
    assert drs.window <= 2.6 * rate * 0.1  # ~2 BDP at the base RTT, not 2 x 3 BDP


def test_guard_still_allows_growth_when_the_rate_rises():
    drs = receiver(floor=64 * KiB, cap=1 << 30)
    link = FakeLink(drs, rtt=0.1)
    link.run(1 * MiB, rtts=4, rtt=0.1)
    window_before = drs.window
    link.run(8 * MiB * 0.2 / 0.1, rtts=4, rtt=0.2)  # inflated RTT, but 8x the rate
    assert drs.window > window_before


def test_peer_reported_cwnd_replaces_the_inference_when_it_binds():
    # Reno/CUBIC in slow start: in flight == cwnd, doubling every RTT, while
    # the bytes seen at the receiver lag; the real cwnd replaces the bound.
    drs, alone = receiver(floor=64 * KiB), receiver(floor=64 * KiB)
    link, link_alone = FakeLink(drs), FakeLink(alone)
    cwnd = 32 * KiB
    for _ in range(8):
        drs.on_peer_report(PeerReport(cwnd=cwnd, inflight=cwnd, rtt=0.1), now=link.t, rtt=0.1)
        window = link.run(cwnd // 4, rtts=1)
        link_alone.run(cwnd // 4, rtts=1)
        cwnd *= 2
    assert window >= 4 * MiB > 2 * alone.window
    # a stale report stops counting
    link.run(256 * KiB, rtts=30)
    assert drs.window < 4 * MiB


def test_bbr_like_cwnd_far_above_flight_does_not_inflate_the_window():
    drs = receiver(floor=64 * KiB)
    link = FakeLink(drs)
    for _ in range(12):
        drs.on_peer_report(PeerReport(cwnd=8 * MiB, inflight=1 * MiB, rtt=0.1), now=link.t, rtt=0.1)
        link.run(1 * MiB, rtts=1)
    assert 1 * MiB <= drs.window <= 1.4 * MiB  # follows the real flight, not the 8 MiB cap


def test_peer_rtt_is_preferred_over_local_estimate():
    drs = receiver()
    drs.on_peer_report(PeerReport(rtt=0.08), now=0.0, rtt=None)
    drs.on_sample(Sample(bytes_received=0), now=0.01, rtt=0.5)
    assert drs.rtt.srtt == pytest.approx(0.08)


def test_sender_buffer_follows_the_receivers_window():
    drs = DRSTuning(Role.SENDER, DRSConfig(floor=64 * KiB))
    # in flight can never exceed min(cwnd, peer window)
    d = drs.on_sample(Sample(peer_window=1 * MiB, cwnd_bytes=512 * KiB), now=0.0, rtt=0.1)
    assert d.sndbuf == int(0.75 * 512 * KiB)  # kernel doubles: 1.5x
    assert d.rcv_window == 16 * KiB  # only ACKs come back: a small buffer (DESIGN.md, item 9)
    drs.on_peer_report(PeerReport(window=8 * MiB), now=0.05, rtt=0.1)
    d = drs.on_sample(Sample(peer_window=1 * MiB), now=0.1, rtt=0.1)
    assert d.sndbuf == 6 * MiB


def test_garbage_peer_reports_change_nothing():
    from drsftp.ftp import drscmd

    drs, twin = receiver(floor=64 * KiB), receiver(floor=64 * KiB)
    link, twin_link = FakeLink(drs), FakeLink(twin)
    link.run(512 * KiB, rtts=3)
    twin_link.run(512 * KiB, rtts=3)
    for bad in ("rtt_us=-1", "cwnd=99999999999999999999", "cwnd=1e9", "x", "rtt_us=61000000",
                "cwnd=1 cwnd=2", " ".join(f"k{i}=1" for i in range(17))):
        with pytest.raises(drscmd.DRSArgumentError):
            drscmd.parse_args(bad)
    # zero values are ignored rather than believed
    drs.on_peer_report(drscmd.to_report(drscmd.parse_args("rtt_us=0 cwnd=0")), now=link.t, rtt=0.1)
    assert link.run(512 * KiB, rtts=5) == twin_link.run(512 * KiB, rtts=5)


def test_registry_and_specs():
    assert {"drs", "kernel", "fixed"} <= set(names())
    assert type(create("kernel", Role.RECEIVER)) is Tuning
    fixed = create("fixed:64k", Role.SENDER)
    assert isinstance(fixed, FixedTuning)
    assert fixed.before_handshake().rcv_window == 65536 == fixed.before_handshake().sndbuf
    assert create("drs:8MiB", Role.RECEIVER).config.cap == 8 * MiB
    assert create("kernel", Role.RECEIVER).on_sample(Sample(), now=0, rtt=0.1).is_empty()
    for bad in ("nope", "fixed", "fixed:abc", "kernel:1", "fixed:-5", "drs:0"):
        with pytest.raises(ValueError):
            create(bad, Role.RECEIVER)
    assert parse_size("4MiB") == 4 * MiB and parse_size("131072") == 131072


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.tuples(st.floats(0.001, 0.5), st.integers(0, 50 * MiB), st.floats(0.0005, 2.0)),
             min_size=1, max_size=60),
    st.integers(16 * KiB, 1 * MiB),
    st.integers(1 * MiB, 256 * MiB),
)
def test_property_window_bounded_and_shrinks_gently(steps, floor, cap):
    """Whatever the byte counts, RTTs and timing: floor <= window <= cap
    (the slow-path floor's eight segments once the pipe was seen full),
    and no single decision shrinks by more than one step."""
    drs = receiver(floor=min(floor, cap), cap=cap)
    t, total, last = 0.0, 0, None
    for dt, nbytes, rtt in steps:
        t += dt
        total += nbytes
        d = drs.on_sample(Sample(bytes_received=total), now=t, rtt=rtt)
        assert drs.config.slow_floor_least <= drs.window <= drs.config.cap
        assert drs.window >= drs.config.floor or drs.queue_seen  # below it only on a path seen full
        if d.rcv_window is not None:
            if last is not None:
                assert d.rcv_window >= int(last * 0.75) - 1  # DESIGN.md item 6: 0.75x per RTT at most
            last = d.rcv_window


@settings(max_examples=100, deadline=None)
@given(st.dictionaries(st.sampled_from(["rtt", "cwnd", "window", "rate", "bytes"]),
                       st.one_of(st.none(), st.integers(1, 1 << 40)), max_size=5))
def test_property_peer_reports_never_break_bounds(fields):
    kwargs = {k: (v / 1e6 if k == "rtt" and v else v) for k, v in fields.items()}
    for role in Role:
        drs = DRSTuning(role, DRSConfig(floor=64 * KiB, cap=32 * MiB))
        drs.on_peer_report(PeerReport(**kwargs), now=0.0, rtt=0.1)
        drs.on_sample(Sample(bytes_received=1 << 20, peer_window=1 << 20), now=0.2, rtt=0.1)
        drs.on_sample(Sample(bytes_received=1 << 21, peer_window=1 << 20), now=0.4, rtt=0.1)
        assert 64 * KiB <= drs.window <= 32 * MiB


def test_growth_is_at_most_the_phase_gain_per_rtt():
    """A burst released after loss recovery must not look like doubling."""
    drs = receiver(floor=64 * KiB, cap=1 << 30)
    link = FakeLink(drs)
    for flight in (256 * KiB, 512 * KiB, 1 * MiB):
        link.run(flight)
    before = drs.window
    link.run(40 * MiB, rtts=1)  # the out-of-order queue delivered at once
    assert drs.window <= 2 * before + 1


def test_open_start_offers_the_cap_then_locks_the_floor_before_data():
    drs = receiver(floor=256 * KiB, cap=32 * MiB)
    assert drs.before_handshake(rtt=0.1) == Decision(rcv_window=32 * MiB)
    # short or unknown paths start closed: the locked ramp is quick there, and
    # the open window would let the sender's startup overshoot through
    assert drs.before_handshake(rtt=0.025).is_empty() and drs.before_handshake().is_empty()
    assert drs.after_handshake(rtt=0.025).is_empty()  # closed: the first tick sets the floor
    assert drs.after_handshake(rtt=0.1) == Decision(rcv_window=256 * KiB)  # the receive side only
    # the first tick has nothing new to say: the floor is already applied
    assert drs.on_sample(Sample(bytes_received=0), now=0.0, rtt=0.1).is_empty()
    # only a receiver opens; off on request
    assert DRSTuning(Role.SENDER).before_handshake(rtt=0.1).is_empty()
    assert DRSTuning(Role.SENDER).after_handshake(rtt=0.1).is_empty()
    assert receiver(open_start=False).before_handshake(rtt=0.1).is_empty()
    assert receiver(open_start=False).after_handshake(rtt=0.1).is_empty()
    closed = create("drs-closed", Role.RECEIVER)
    assert closed.name == "drs-closed" and closed.before_handshake(rtt=0.1).is_empty()


def test_a_filling_queue_grows_the_flight_not_the_rate_so_slow_start_ends():
    """The sender's in-flight bytes double (a queue building) while the
    delivery rate stays flat: that is a full pipe, not slow start."""
    drs = receiver(floor=64 * KiB, cap=1 << 30)
    link = FakeLink(drs)
    link.run(1 * MiB, rtts=3)
    inflight = 1 * MiB
    for _ in range(3):
        inflight *= 2
        drs.on_peer_report(PeerReport(inflight=inflight, cwnd=4 * inflight), now=link.t, rtt=None)
        link.run(1 * MiB)
        assert not drs.slow_start
    # while a rate that doubles is slow start
    fresh = receiver(floor=64 * KiB, cap=1 << 30)
    fresh_link, flight = FakeLink(fresh), 256 * KiB
    for _ in range(4):
        fresh_link.run(flight)
        flight *= 2
    assert fresh.slow_start


def _sender_ticks(cwnds, acked_per_tick, rtt=0.1):
    """A sender sampled every half RTT; returns it and its (sndbuf, unsent) decisions."""
    drs = DRSTuning(Role.SENDER, DRSConfig(floor=64 * KiB, cap=1 << 30))
    acked, t, out = 0, 0.0, []
    for cwnd, more in zip(cwnds, acked_per_tick):
        acked += more
        drs.on_sample(Sample(peer_window=1 << 29, cwnd_bytes=cwnd, bytes_acked=acked), now=t, rtt=rtt)
        out.append((drs.window, drs.notsent))
        t += rtt / 2
    return drs, out


def _startup(rate_growth, ticks=8):
    """BBR startup as a sender sees it every half RTT: the cwnd grows 1.7x
    per tick while the acked bytes per tick grow by ``rate_growth``.
    Returns (cwnds, bytes acked in each tick)."""
    cwnds = [int(256 * KiB * 1.7 ** i) for i in range(ticks)]
    return cwnds, [0] + [int(128 * KiB * rate_growth ** i) for i in range(1, ticks)]


def _sender_run(rate_growth, ticks=8):
    """(cwnd, sndbuf decision) at each tick of :func:`_startup`."""
    cwnds, acked = _startup(rate_growth, ticks)
    _, out = _sender_ticks(cwnds, acked)
    return [(cwnd, window) for cwnd, (window, _) in zip(cwnds, out)]


def test_sender_gives_a_growing_rate_one_tick_of_headroom():
    # the acked rate is known after one RTT and compared with one RTT earlier
    grows = _sender_run(rate_growth=1.7)
    assert all(size >= 0.75 * 1.5 * c - 1 for c, size in grows[4:])
    # a cwnd growing at a flat rate is a queue filling (BBR): no headroom
    flat = _sender_run(rate_growth=1.0)
    assert all(size == int(0.75 * c) for c, size in flat[4:])


def test_a_steady_sender_queues_only_its_wakeup_latency_past_the_flight():
    """The buffer still holds 1.5 x the flight (a writer is woken only when
    half the queued memory is free), but unsent data past the flight is
    what the cwnd sends in ``unsent_time``, not half the buffer."""
    drs, _ = _sender_ticks([2_500_000] * 20, [625_000] * 20)  # 100 Mbit/s, 100 ms, BBR's 2 BDP cwnd
    assert drs.window == int(0.75 * 2_500_000)
    assert drs.notsent == pytest.approx(0.02 * 2_500_000 / 0.1, rel=0.02)  # 500 kB, 0.4 BDP
    short, _ = _sender_ticks([250_000] * 200, [31_250] * 200, rtt=0.0005)  # 1 Gbit/s, 0.5 ms
    assert short.notsent == short.window  # never more than the buffer decision


def test_the_unsent_allowance_follows_the_cwnd_not_a_repaired_holes_burst():
    """In slow start the cwnd's rate leads the acked rate, which lags a
    doubling sender; after a repaired hole the cumulative ACK jumps a window
    at once, a spike in the acked rate that is no faster sending (with it
    the allowance took the whole buffer: 2.2 BDP unsent at the peak)."""
    cwnds, acked = _startup(rate_growth=1.7)
    _, growing = _sender_ticks(cwnds, acked)
    assert [n for _, n in growing][2:] == [pytest.approx(0.02 * c / 0.1, rel=0.02) for c in cwnds[2:]]
    burst = [625_000] * 10 + [3_000_000] + [625_000] * 5  # a hole repaired: 2.4 BDP acked at once
    _, ticks = _sender_ticks([2_500_000] * 16, burst)
    assert max(n for _, n in ticks[10:]) == pytest.approx(500_000, rel=0.02)


def test_sender_buffer_is_bounded_by_the_receivers_reported_window():
    steady = DRSTuning(Role.SENDER, DRSConfig(floor=64 * KiB, cap=1 << 30, hold_periods=0))
    steady.on_peer_report(PeerReport(window=1 * MiB), now=0.0, rtt=None)
    for i in range(4):
        steady.on_sample(Sample(cwnd_bytes=(8 << 20) * 2 ** i), now=0.05 * i, rtt=0.1)
    assert steady.window == int(0.75 * MiB)


def test_an_inflated_first_rtt_does_not_end_slow_start():
    """The first RTT samples of a connection run high (delayed ACKs, the
    handshake); smoothed into srtt they once read as a queue and ended slow
    start before it began (put, 1 Gbit/s, 100 ms)."""
    drs = receiver(floor=64 * KiB, cap=1 << 30)
    link = FakeLink(drs, rtt=0.16)
    link.run(64 * KiB, rtts=1, rtt=0.16)
    flight = 128 * KiB
    for _ in range(6):
        window = link.run(flight, rtt=0.1)
        assert drs.slow_start and not drs.queue_seen
        assert window >= 1.9 * flight
        flight *= 2


def _lossy_receiver(ticks, step, rate=12.5e6, rtt=0.1):
    """A receiver fed every half RTT at ``rate`` (100 Mbit/s).  ``step(i)``
    gives tick i's (delivery as a multiple of the rate, out-of-order packets
    added, RTT seen).  Returns the receiver and its window after each tick."""
    drs = receiver(floor=64 * KiB, cap=1 << 30)
    drs.on_sample(Sample(bytes_received=0, out_of_order=0), now=0.0, rtt=rtt)
    t, total, ooo, windows = 0.0, 0, 0, []
    for i in range(ticks):
        delivered, holes, seen = step(i)
        t += rtt / 2
        total += int(rate * rtt / 2 * delivered)
        ooo += holes
        drs.on_sample(Sample(bytes_received=total, out_of_order=ooo), now=t, rtt=seen)
        windows.append(drs.window)
    return drs, windows


def _guarded_receiver_in_loss(ooo_from=None, rtts=40, rtt=0.1):
    """A steady flow whose RTT reads a standing queue (1.3 x min_rtt, so the
    queue guard binds) but for every fourth tick, when BBR has drained it;
    random loss leaves holes at those ticks from tick ``ooo_from`` on
    (None: never)."""
    def step(i):
        drained = i < 4 or i % 4 == 0
        holes = 3 if ooo_from is not None and i >= ooo_from and drained else 0
        return 1, holes, rtt if drained else 1.3 * rtt
    return _lossy_receiver(rtts * 2, step, rtt=rtt)


def test_loss_recovery_opens_room_past_the_hole_beyond_the_queue_guard():
    """The window counts from the cumulative ACK: while a hole is repaired
    the sender needs ~2 BDP past it.  The guard's 1.25 x rate x min_rtt
    stalled it (docs/DESIGN.md#drs-loss-recovery); out-of-order arrivals
    open recovery_window x mean rate x min_rtt at once, and it stays
    while the guard binds."""
    bdp = 12.5e6 * 0.1
    calm, calm_windows = _guarded_receiver_in_loss()
    assert calm.queue_seen and calm_windows[-1] <= 1.35 * bdp
    _lossy, windows = _guarded_receiver_in_loss(ooo_from=40)
    assert windows[39] == calm_windows[39]  # the same until the first hole
    assert windows[40] >= 2.9 * bdp  # at once, not a growth step per RTT
    assert min(windows[40:]) >= 2.9 * bdp  # also at the ticks where the guard binds
    assert max(windows) <= 3.05 * bdp  # at the base RTT and mean rate: no growth with the queue


def test_recovery_room_shrinks_gently_after_the_last_hole():
    drs, _windows = _guarded_receiver_in_loss(ooo_from=10, rtts=10)
    room = drs.window
    t, total = 1.0, drs._history[-1][1]
    after = []
    for _ in range(100):  # no new out-of-order arrivals
        t += 0.05
        total += int(12.5e6 * 0.05)
        drs.on_sample(Sample(bytes_received=total, out_of_order=drs._out_of_order), now=t, rtt=0.13)
        after.append(drs.window)
    assert after[25] == room  # held for recovery_periods RTTs after the last hole: the next is near
    for before, now in zip([room] + after, after):
        assert now >= int(before * 0.75 ** 0.5) - 1  # at most a shrink step per RTT
    assert after[-1] <= 1.35 * 12.5e6 * 0.1


def test_sender_buffer_also_holds_sacked_and_lost_data_within_the_peer_window():
    drs = DRSTuning(Role.SENDER, DRSConfig(floor=64 * KiB, cap=1 << 30))
    d = drs.on_sample(Sample(peer_window=4 * MiB, cwnd_bytes=2 * MiB, held_bytes=1 * MiB), now=0.0, rtt=0.1)
    assert d.sndbuf == int(0.75 * 3 * MiB)
    big = DRSTuning(Role.SENDER, DRSConfig(floor=64 * KiB, cap=1 << 30))
    d = big.on_sample(Sample(peer_window=4 * MiB, cwnd_bytes=2 * MiB, held_bytes=8 * MiB), now=0.0, rtt=0.1)
    assert d.sndbuf == int(0.75 * 4 * MiB)  # never more than the peer lets be outstanding


def test_recovery_room_follows_the_mean_rate_not_a_repaired_holes_burst():
    """A repaired hole releases the data held past it at once: one tick reads
    twice the line rate.  The room is reckoned at the mean rate."""
    bdp = 12.5e6 * 0.1

    def step(i):
        stalled, burst = i % 8 == 4, i % 8 == 5  # a hole, then its release
        return (0 if stalled else 2 if burst else 1), (40 if stalled else 0), 0.1
    _drs, windows = _lossy_receiver(60, step)
    assert max(windows[9:]) <= 3.3 * bdp
    assert windows[-1] >= 2.7 * bdp


def test_holes_at_a_full_queue_open_no_recovery_room():
    """Drops at a full bottleneck queue come with an inflated RTT: room past
    them would let the sender overfill the queue again."""
    drs, _ = _lossy_receiver(40, lambda i: (1, 30 if i >= 8 else 0, 0.1 if i < 8 else 0.2))
    assert drs.window <= 1.35 * 12.5e6 * 0.1  # the queue guard's, not the recovery room


def test_ticks_follow_half_the_rtt_but_never_faster_than_the_app_delay():
    drs = receiver()
    drs.slow_start = False  # slow start ticks faster: tests/test_tuning_lead.py
    assert drs.tick_interval(rtt=0.1) == pytest.approx(0.05)
    assert drs.tick_interval(rtt=0.0005) == pytest.approx(0.010)  # DESIGN.md: ticks of 10 ms at least
    assert drs.tick_interval(rtt=5.0) == 0.25


def test_at_sub_tick_rtts_the_sender_holds_its_buffer_over_app_delay_periods():
    """At 0.5 ms a hold of 4 RTTs is shorter than a tick: the buffer followed
    each tick's cwnd up and down, a setsockopt each time."""
    drs = DRSTuning(Role.SENDER, DRSConfig(floor=64 * KiB, cap=1 << 30))
    sizes = []
    for i in range(12):
        cwnd = 700 * KiB if i % 2 == 0 else 350 * KiB
        drs.on_sample(Sample(peer_window=4 * MiB, cwnd_bytes=cwnd), now=0.01 * i, rtt=0.0005)
        sizes.append(drs.window)
    assert sizes == [int(0.75 * 700 * KiB)] * 12


def _steady_window(rtt, rate, **cfg):
    """The receive window after 4 s of a flat ``rate`` (bytes/s) at ``rtt``."""
    drs = receiver(**cfg)
    link = FakeLink(drs, rtt=rtt)
    return link.run(rate * rtt, rtts=4 / rtt)


def test_short_paths_get_the_cpu_floor():
    """0.5 ms, 200 Mbit/s: DRS alone sizes 25 MB/s x 10 ms (app_delay) x 1.25
    = 312 KB; the floor keeps the window at 4 MiB (the sender's writes and
    this reader's batches large: docs/DESIGN.md)."""
    rate = 25e6
    alone = _steady_window(0.0005, rate, cpu_floor_rtt=0.0)  # the floor switched off
    assert 250e3 <= alone <= 512 * KiB
    assert _steady_window(0.0005, rate) == DRSConfig.cpu_floor == 4 * MiB
    # loopback's rates: DRS's own window is above the floor already
    assert _steady_window(0.0001, 1e9) > 4 * MiB
    # the floor reaches up to 10 ms (docs/DESIGN.md#cpu-floor): 8 ms is floored too
    assert _steady_window(0.008, rate) == 4 * MiB


@pytest.mark.parametrize(("rtt", "rate", "upper"), [
    (0.010, 12.5e6, 256 * KiB),  # 10 ms, 100 Mbit/s: at the threshold, not below it
    (0.025, 12.5e6, 512 * KiB),  # 25 ms, 100 Mbit/s: BDP 312 KB
    (0.100, 12.5e6, 2 * MiB),  # 100 ms, 100 Mbit/s: BDP 1.25 MB
])
def test_long_paths_keep_the_drs_window(rtt, rate, upper):
    """The floor must not raise memory where DRS saves it: at 10 ms and
    beyond the window is DRS's (~1.25 BDP), far under 4 MiB."""
    window = _steady_window(rtt, rate)
    assert window == _steady_window(rtt, rate, cpu_floor_rtt=0.0)
    assert window <= upper < DRSConfig.cpu_floor


def test_fast_long_paths_are_above_the_floor_anyway():
    """1 Gbit/s x 100 ms = 12.5 MB: DRS's window there is 3x the floor."""
    assert _steady_window(0.100, 125e6, cap=256 * MiB) >= 12.5e6
