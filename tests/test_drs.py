"""drsftp/tuning/drs.py: Dynamic Right-Sizing's receiver and sender rules
(docs/DESIGN.md, "The DRS controller"; docs/PROTOCOL.md for the peer's
report).  Expected values come from the RFCs and the docs, written here, not
read back from the module's constants (docs/MUTATION.md: many of these tests
pin a rule a mutation run found open)."""

import dataclasses
import itertools

import pytest

from drsftp.tuning import Decision, DRSConfig, DRSTuning, PeerReport, Role, Sample
from drsftp.tuning.drs import RTTEstimator

KiB, MiB = 1 << 10, 1 << 20


# -- DRS's clamp (docs/DESIGN.md item 7: [floor 256 KiB, cap], cap 64 MiB by default) --

def test_drs_window_starts_at_256_kib_and_stops_at_64_mib():
    drs = DRSTuning(Role.RECEIVER)
    assert drs.on_sample(Sample(bytes_received=0), now=0.0, rtt=0.1) == Decision(rcv_window=256 * KiB,
                                                                                 sndbuf=16 * KiB)
    total = 0
    for i in range(1, 80):
        total += 100 * MiB  # 1 GB/s for 100 ms per tick: far past the cap
        drs.on_sample(Sample(bytes_received=total), now=i * 0.05, rtt=0.1)
    assert drs.window == 64 * MiB


def test_drs_config_needs_0_lt_floor_le_cap():
    assert DRSConfig(floor=1, cap=1).floor == 1
    for floor, cap in ((0, 1), (2, 1)):
        with pytest.raises(ValueError):
            DRSConfig(floor=floor, cap=cap)
    with pytest.raises(dataclasses.FrozenInstanceError):
        DRSConfig().floor = 1


def test_rtt_samples_smoothed_at_one_eighth_and_only_within_0_to_60_s():
    """RFC 6298 sec. 2: SRTT <- 7/8 SRTT + 1/8 R'; a sample of 0 or of a
    minute or more is no RTT (docs/PROTOCOL.md: rtt_us up to 60 s)."""
    est = RTTEstimator()
    for bad in (0.0, 60.0, -1.0, None):
        est.update(bad)
    assert est.srtt is None and est.min_rtt is None
    est.update(0.1)
    est.update(0.2)
    assert est.srtt == pytest.approx(0.1125) and est.min_rtt == 0.1 and est.latest == 0.2
    est.update(59.9)
    assert est.latest == 59.9


def test_ticks_default_to_half_of_50_ms_until_an_rtt_is_known():
    drs = DRSTuning(Role.RECEIVER)
    assert drs.tick_interval(rtt=None) == pytest.approx(0.010)  # slow start: 50 ms / 8, 10 ms at least
    drs.slow_start = False
    assert drs.tick_interval(rtt=None) == pytest.approx(0.025)


def test_open_start_from_40_ms_inclusive():
    """docs/DESIGN.md, "Open start": on a path of 40 ms or more."""
    assert DRSTuning(Role.RECEIVER).before_handshake(rtt=0.04) == Decision(rcv_window=64 * MiB)
    assert DRSTuning(Role.RECEIVER).before_handshake(rtt=0.039).is_empty()


def _peer_fed(cwnd, inflight, delivered=1 * MiB, rtts=25):
    drs = DRSTuning(Role.RECEIVER, DRSConfig(floor=64 * KiB, cap=1 << 30))
    t, total = 0.0, 0
    drs.on_sample(Sample(bytes_received=0), now=t, rtt=0.1)
    for _ in range(rtts):
        drs.on_peer_report(PeerReport(cwnd=cwnd, inflight=inflight, rtt=0.1), now=t, rtt=0.1)
        for _ in range(2):
            t += 0.05
            total += delivered // 2
            drs.on_sample(Sample(bytes_received=total), now=t, rtt=0.1)
    return drs


def test_the_senders_inflight_beats_a_smaller_inference():
    """docs/DESIGN.md item 2: its exact bytes in flight (the receiver's count lags)."""
    drs = _peer_fed(cwnd=8 * MiB, inflight=2 * MiB)  # BBR: a cwnd 4x the flight is not used
    assert 1.2 * 2 * MiB <= drs.window <= 1.3 * 2 * MiB


def test_a_cwnd_exactly_80_percent_full_is_believed():
    drs = _peer_fed(cwnd=5 * MiB, inflight=4 * MiB)
    assert drs.window >= 1.2 * 5 * MiB


def test_peer_reports_stay_fresh_two_rtts():
    """docs/PROTOCOL.md: reports older than two RTTs (or 0.5 s) are stale.
    While fresh, the peer's RTT is used and the local one ignored."""
    def srtt_after(age):
        drs = DRSTuning(Role.RECEIVER)
        drs.on_peer_report(PeerReport(rtt=0.4), now=0.0, rtt=None)
        drs.on_sample(Sample(bytes_received=0), now=age, rtt=0.1)
        return drs.rtt.srtt
    assert srtt_after(0.75) == pytest.approx(0.4)  # 2 x 0.4 s
    assert srtt_after(0.85) == pytest.approx(0.4 + (0.1 - 0.4) / 8)


def test_changes_of_a_sixteenth_or_less_are_not_applied():
    """Not worth a syscall; the sender's need here is the peer's window."""
    drs = DRSTuning(Role.SENDER, DRSConfig(floor=64 * KiB, cap=1 << 30, hold_periods=0))
    first = drs.on_sample(Sample(peer_window=4 * MiB, cwnd_bytes=8 * MiB), now=0.0, rtt=0.1)
    assert first.sndbuf == 3 * MiB
    assert drs.on_sample(Sample(peer_window=4 * MiB * 17 // 16, cwnd_bytes=8 * MiB), now=0.05, rtt=0.1).is_empty()
    assert drs.on_sample(Sample(peer_window=4 * MiB * 18 // 16, cwnd_bytes=8 * MiB), now=0.1,
                         rtt=0.1).sndbuf == 3 * MiB * 18 // 16


def test_unsent_allowance_floor_64_kib_and_rate_over_2_ms_at_least():
    """20 ms at cwnd / max(srtt, 2 ms), at least 64 KiB (one GSO super-packet)."""
    slow = DRSTuning(Role.SENDER, DRSConfig(cap=1 << 30))
    assert slow.on_sample(Sample(peer_window=4 * MiB, cwnd_bytes=100 * KiB), now=0.0, rtt=0.1).notsent == 64 * KiB
    short = DRSTuning(Role.SENDER, DRSConfig(cap=1 << 30))
    d = short.on_sample(Sample(peer_window=4 * MiB, cwnd_bytes=20_000), now=0.0, rtt=0.0005)
    assert d.notsent == int(0.02 * 20_000 / 0.002)  # 200 kB, within the 256 KiB buffer


def test_recovery_room_lasts_16_rtts_after_the_last_hole():
    """docs/DESIGN.md item 8: out-of-order arrivals within the last 16 RTTs."""
    rate, rtt = 12.5e6, 0.1
    drs = DRSTuning(Role.RECEIVER, DRSConfig(floor=64 * KiB, cap=1 << 30))
    drs.on_sample(Sample(bytes_received=0, out_of_order=0), now=0.0, rtt=rtt)
    total, ooo, windows = 0, 0, {}
    for i in range(1, 80):  # ticks every half RTT; one hole at tick 20 (t = 1.0 s)
        total += int(rate * rtt / 2)
        ooo += 3 if i == 20 else 0
        drs.on_sample(Sample(bytes_received=total, out_of_order=ooo), now=i * rtt / 2, rtt=rtt)
        windows[i] = drs.window
    room = windows[20]
    assert room >= 2.9 * rate * rtt  # 3 x rate x min_rtt
    assert all(windows[i] == room for i in range(20, 52))  # through t = 2.55 s
    assert windows[53] < room  # t = 2.65 s: 16 RTTs (1.6 s) after the hole have passed


def test_a_tick_spanning_many_rtts_grows_the_window_one_gain_only():
    """docs/DESIGN.md item 6: growth of at most the phase's gain per RTT, and
    a tick of 10 ms at a 0.5 ms RTT (ticks never come faster than 10 ms)
    counts as one RTT, not twenty: one doubling in slow start."""
    drs = DRSTuning(Role.RECEIVER, DRSConfig(floor=64 * KiB, cap=1 << 30))
    total = 0
    for i in range(40):  # 100 MB/s steady: the window settles
        total += 1_000_000
        drs.on_sample(Sample(bytes_received=total), now=i * 0.010, rtt=0.0005)
    before = drs.window
    total += 8_000_000  # the rate jumps 8x
    drs.on_sample(Sample(bytes_received=total), now=0.400, rtt=0.0005)
    assert drs.slow_start
    assert drs.window == pytest.approx(2 * before, rel=0.01)


def _growing_sender(reported, kernel, ticks=8):
    """BBR startup seen by the sender every half RTT (cwnd 1.7x per tick,
    acked rate 1.7x per tick), with a fresh DRS report of the receiver's
    window ``reported`` and the kernel's view of it ``kernel``."""
    drs = DRSTuning(Role.SENDER, DRSConfig(floor=64 * KiB, cap=1 << 30))
    acked = 0
    for i in range(ticks):
        acked += int(128 * KiB * 1.7 ** i) if i else 0
        drs.on_peer_report(PeerReport(window=reported, rtt=0.1), now=i * 0.05, rtt=0.1)
        drs.on_sample(Sample(peer_window=kernel, cwnd_bytes=int(256 * KiB * 1.7 ** i), bytes_acked=acked),
                      now=i * 0.05, rtt=0.1)
    return drs


def test_a_growing_sender_may_use_the_larger_of_the_reported_and_kernel_windows():
    """docs/DESIGN.md, Sender: in slow start, a cwnd and a peer window of
    1.5x the current ones, the peer window the larger of the report and
    what the kernel says the receiver offers (it may be ahead of the last
    DRS report, or behind it)."""
    for reported, kernel in ((8 * MiB, 1 * MiB), (1 * MiB, 8 * MiB)):
        assert _growing_sender(reported, kernel).window == 9 * MiB  # 0.75 x 1.5 x 8 MiB


def test_a_sender_without_any_window_figure_keeps_its_buffer():
    drs = DRSTuning(Role.SENDER, DRSConfig(floor=64 * KiB, cap=1 << 30))
    drs.on_sample(Sample(peer_window=4 * MiB, cwnd_bytes=4 * MiB), now=0.0, rtt=0.1)
    for i in range(1, 40):  # 2 s of samples that know neither the cwnd nor the peer's window
        assert drs.on_sample(Sample(), now=i * 0.05, rtt=0.1).is_empty()
    assert drs.window == 3 * MiB


def test_the_sender_keeps_two_rtts_of_rate_history():
    """Bounded memory over a long transfer (COMMON rules: every loop bounded)."""
    drs = DRSTuning(Role.SENDER, DRSConfig(floor=64 * KiB, cap=1 << 30))
    for i in range(2000):
        drs.on_sample(Sample(peer_window=4 * MiB, cwnd_bytes=2 * MiB, bytes_acked=i * 625_000),
                      now=i * 0.05, rtt=0.1)
    assert len(drs._rates) <= 5  # 2 RTTs of half-RTT ticks


def test_the_measurement_interpolates_the_bytes_at_the_spans_start():
    """Sliding measurement (docs/DESIGN.md item 1): the bytes over exactly
    the last span, the count at its start interpolated between samples."""
    drs = DRSTuning(Role.RECEIVER)
    assert drs._rate(0, 0.0, 0.1) is None
    assert drs._rate(1000, 0.06, 0.1) is None  # less than a span of history
    # at 0.02 s (the span's start) 1/3 of the way from 0 to 1000 bytes
    assert drs._rate(4000, 0.12, 0.1) == pytest.approx((4000 - 1000 / 3) / 0.1)
    idle_first = DRSTuning(Role.RECEIVER)  # no bytes yet at the middle sample: over 0.1 s, not 0.12 s
    for total, now in ((0, 0.0), (0, 0.06)):
        idle_first._rate(total, now, 0.1)
    assert idle_first._rate(4000, 0.12, 0.1) == pytest.approx(4000 / 0.1)


def test_a_steady_receiver_sends_no_decisions():
    """A window within 1/16 of the applied one is not worth a syscall."""
    drs = DRSTuning(Role.RECEIVER, DRSConfig(floor=64 * KiB, cap=1 << 30))
    total, decisions = 0, []
    for i in range(60):
        total += 625_000  # 100 Mbit/s, 100 ms, ticks every half RTT
        decisions.append(drs.on_sample(Sample(bytes_received=total), now=i * 0.05, rtt=0.1))
    assert all(d.is_empty() for d in decisions[-20:])


def test_peer_reports_stay_fresh_half_a_second_on_short_paths():
    drs = DRSTuning(Role.RECEIVER)
    drs.on_peer_report(PeerReport(rtt=0.1), now=0.0, rtt=None)
    drs.on_sample(Sample(bytes_received=0), now=0.45, rtt=0.3)
    assert drs.rtt.srtt == pytest.approx(0.1)  # 2 RTTs are 0.2 s: 0.5 s is the floor
    drs.on_sample(Sample(bytes_received=0), now=0.55, rtt=0.3)
    assert drs.rtt.srtt == pytest.approx(0.1 + (0.3 - 0.1) / 8)


def _steady_sender_then(last_tick_acked, ticks=20):
    """A sender at 100 Mbit/s, 100 ms (625 kB acked per half-RTT tick, cwnd
    2.5 MB); its last tick acks ``last_tick_acked``.  Returns its window."""
    drs = DRSTuning(Role.SENDER, DRSConfig(floor=64 * KiB, cap=1 << 30))
    acked = 0
    for i in range(ticks + 1):
        acked += last_tick_acked if i == ticks else 625_000
        drs.on_sample(Sample(peer_window=1 << 29, cwnd_bytes=2_500_000, bytes_acked=acked), now=i * 0.05, rtt=0.1)
    return drs.window


def test_the_senders_growth_test_compares_rates_over_an_rtt_one_rtt_apart():
    """docs/DESIGN.md, Sender: the acked rate grows at least 1.5x per RTT.
    A tick acking 1.6x is 1.3x over the RTT: no headroom; 1.3x per tick
    (1.69x per RTT) is growth."""
    assert _steady_sender_then(1_000_000) == int(0.75 * 2_500_000)
    assert all(size >= int(0.75 * 1.5 * c) - 1 for c, size in _sender_windows_grow(1.3)[4:])


def _sender_windows_grow(rate_growth, ticks=8):
    drs = DRSTuning(Role.SENDER, DRSConfig(floor=64 * KiB, cap=1 << 30))
    acked, out = 0, []
    for i in range(ticks):
        cwnd = int(256 * KiB * 1.7 ** i)
        acked += int(128 * KiB * rate_growth ** i) if i else 0
        drs.on_sample(Sample(peer_window=1 << 29, cwnd_bytes=cwnd, bytes_acked=acked), now=i * 0.05, rtt=0.1)
        out.append((cwnd, drs.window))
    return out


def test_the_rate_since_a_moment_interpolates_the_bytes_at_it():
    """drs._rate_since (the hold's rate and the lead's): the bytes at
    ``start`` interpolated between the entries around it, the rate from
    there to the newest; none when no entry is that old or no time passed."""
    from collections import deque

    from drsftp.tuning.drs import _rate_since

    hist = deque([(0.0, 0), (1.0, 100), (2.0, 300), (3.0, 600)])
    assert _rate_since(hist, 0.5) == pytest.approx((600 - 50) / 2.5)  # 50 bytes at 0.5 s, not 75
    assert _rate_since(hist, 1.0) == pytest.approx(500 / 2.0)  # at an entry
    assert _rate_since(hist, 1.5) == pytest.approx((600 - 200) / 1.5)  # between the second and third
    assert _rate_since(hist, 3.0) is None  # no time since: no rate (nor a division by zero)
    assert _rate_since(hist, -0.5) is None  # no entry that old
    assert _rate_since(deque([(0.0, 0), (1.0, 0), (2.0, 0)]), 0.5) == 0.0  # nothing arrived: 0 B/s


def _long_path(rtt, phases):
    """A receiver fed ``rate`` bytes/s for ``seconds`` per phase, ticking every 0.25 s
    (the longest tick): its window changes as (time, window)."""
    drs = DRSTuning(Role.RECEIVER)
    now, got, changes = 0.0, 0.0, []
    for rate, seconds in phases:
        end = now + seconds
        while now < end - 1e-9:
            decision = drs.on_sample(Sample(bytes_received=int(got)), now=now, rtt=rtt)
            if decision.rcv_window:
                changes.append((now, decision.rcv_window))
            now += 0.25
            got += rate * 0.25
    return changes


def _steps(changes, start, end):
    run = [(t, w) for t, w in changes if start <= t <= end]
    return [(round(t1 - t0, 6), w1 / w0) for (t0, w0), (t1, w1) in itertools.pairwise(run)]


def _all_alike(steps, step):
    return len(steps) >= 3 and steps == [step] * len(steps)


def test_past_an_rtt_of_a_second_each_step_counts_from_the_last_change():
    """docs/DESIGN.md#drs-rate-limits: 1.25x a round trip up, 0.75x down; a
    0.25 s tick's step at 1-2 s RTTs is under the 1/16 threshold, so the
    step counts from the window's last change."""
    one = _long_path(1.0, [(4e6, 10)])
    assert _all_alike(_steps(one, 6, 9), (0.5, pytest.approx(1.25 ** 0.5, rel=1e-6)))  # two ticks: half an RTT
    two = _long_path(2.0, [(4e6, 30), (8e6, 20), (2e6, 30)])
    assert _all_alike(_steps(two, 21, 24), (0.75, pytest.approx(1.25 ** 0.375, rel=1e-6)))  # three: 3/8 of one
    assert (30.25, 11_250_000) in two  # held since 24.75: a whole RTT's 1.25x, the target 1.25 x 9 MB
    assert _all_alike(_steps(two, 58, 63), (0.5, pytest.approx(0.75 ** 0.25, rel=1e-6)))  # down: two ticks
