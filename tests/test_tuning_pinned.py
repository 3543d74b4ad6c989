"""DRS's thresholds pinned in numbers written here, from docs/DESIGN.md
("The DRS controller"), not read back from DRSConfig: a wrong constant in
drsftp/tuning/drs.py fails one of these (docs/MUTATION.md)."""

from itertools import pairwise

import pytest

from drsftp.tuning import DRSConfig, DRSTuning, PeerReport, Role, Sample

KiB, MiB = 1024, 1024 * 1024


def receiver(**cfg):
    return DRSTuning(Role.RECEIVER, DRSConfig(**cfg))


def feed(drs, per_rtt, rtts, rtt=0.1, t=0.0, total=0, seen=None):
    """Deliver ``per_rtt(i)`` bytes in RTT i, ticking every half RTT at the
    RTT ``seen(i)`` (default ``rtt``).  Returns (time, bytes, windows per RTT)."""
    windows = []
    for i in range(rtts):
        for _ in range(2):
            t += rtt / 2
            total += int(per_rtt(i) / 2)
            drs.on_sample(Sample(bytes_received=total), now=t, rtt=seen(i) if seen else rtt)
        windows.append(drs.window)
    return t, total, windows


def started(**cfg):
    drs = receiver(floor=64 * KiB, cap=1 << 30, **cfg)
    drs.on_sample(Sample(bytes_received=0), now=0.0, rtt=0.1)
    return drs


# -- slow start is a delivery rate growing at least 1.5x per RTT (DESIGN 4) --

def test_a_rate_growing_1_3x_per_rtt_is_not_slow_start():
    """1.3x per RTT is below the 1.5x that tells doubling: the window is the
    steady 1.25x the measurement, not 2x."""
    drs = started()

    def flight(i):
        return 512 * KiB * 1.3 ** i

    _, _, windows = feed(drs, flight, 10)
    assert not drs.slow_start
    assert windows[-1] <= 1.3 * flight(9)  # 1.25x, not 2x (2.6x)


def test_a_rate_growing_1_6x_per_rtt_is_slow_start():
    drs = started()

    def flight(i):
        return 256 * KiB * 1.6 ** i

    _, _, windows = feed(drs, flight, 8)
    assert drs.slow_start
    assert windows[-1] >= 1.9 * flight(7)


def _sender_windows(rate_growth, ticks=8, rtt=0.1):
    """A sender sampled every half RTT whose cwnd grows 1.7x per tick and whose
    acked rate grows ``rate_growth`` per tick.  Returns (cwnd, sndbuf) pairs."""
    drs = DRSTuning(Role.SENDER, DRSConfig(floor=64 * KiB, cap=1 << 30))
    acked, out = 0, []
    for i in range(ticks):
        cwnd = int(256 * KiB * 1.7 ** i)
        acked += int(128 * KiB * rate_growth ** i) if i else 0
        drs.on_sample(Sample(peer_window=1 << 29, cwnd_bytes=cwnd, bytes_acked=acked), now=i * rtt / 2, rtt=rtt)
        out.append((cwnd, drs.window))
    return out


def test_sender_gives_no_growth_headroom_to_a_rate_growing_1_2x_per_rtt():
    # 1.1x per half-RTT tick: 1.21x per RTT, below 1.5x; SO_SNDBUF = 0.75 x cwnd (DESIGN, Sender)
    assert all(size == int(0.75 * c) for c, size in _sender_windows(1.1)[4:])
    # 1.7x per tick: 2.9x per RTT: a cwnd of 1.5x the current one is allowed
    assert all(size >= int(0.75 * 1.5 * c) - 1 for c, size in _sender_windows(1.7)[4:])


# -- the sender's cwnd replaces the inference only when in flight >= 80% of it (DESIGN 2) --

def _with_peer(cwnd, inflight, rtts=25):
    drs = started()
    t, total = 0.0, 0
    for _ in range(rtts):
        drs.on_peer_report(PeerReport(cwnd=cwnd, inflight=inflight, rtt=0.1), now=t, rtt=0.1)
        t, total, _ = feed(drs, lambda i: inflight, 1, t=t, total=total)
    return drs


def test_a_bbr_cwnd_twice_the_flight_is_not_used():
    """A BBR cwnd is a cap about 2x its flight (in flight 50% of cwnd)."""
    drs = _with_peer(cwnd=4 * MiB, inflight=2 * MiB)
    assert 2 * MiB <= drs.window <= 1.3 * 2 * MiB  # follows the flight, not the 4 MiB cwnd


def test_a_cwnd_limited_sender_85_percent_full_is_believed():
    """Reno/CUBIC: in flight at least 80% of cwnd; the cwnd is the real window."""
    drs = _with_peer(cwnd=4 * MiB, inflight=int(0.85 * 4 * MiB))
    assert drs.window >= 1.2 * 4 * MiB


# -- below 10 ms the window is sized from the application's delay (DESIGN 1, 3) --

def test_at_half_a_millisecond_the_window_covers_10_ms_of_the_rate():
    """1 Gbit/s at 0.5 ms RTT: rate x max(RTT, 10 ms) = 1.25 MB measured, the
    steady window 1.25x that (the driver ticks every 10 ms there).  The
    short-path CPU floor (4 MiB, docs/DESIGN.md) is off here: it is pinned
    by its own test; this one pins the 10 ms application delay."""
    rate = 125e6
    drs = receiver(floor=64 * KiB, cap=1 << 30, cpu_floor=0)
    total = 0
    for i in range(60):
        total += int(rate * 0.010)
        drs.on_sample(Sample(bytes_received=total), now=i * 0.010, rtt=0.0005)
    assert drs.window == pytest.approx(1.25 * rate * 0.010, rel=0.05)
    assert drs.tick_interval(rtt=0.0005) == pytest.approx(0.010)
    steady = receiver()
    steady.slow_start = False  # slow start ticks faster: tests/test_tuning_lead.py
    assert steady.tick_interval(rtt=0.004) == pytest.approx(0.010)  # half of 4 ms is below 10 ms
    assert steady.tick_interval(rtt=0.030) == pytest.approx(0.015)


def test_at_half_a_millisecond_the_sender_holds_its_peak_40_ms():
    """The hold is 4 RTTs, 40 ms at least: a peak 30 ms old still counts,
    one 50 ms old no longer."""
    drs = DRSTuning(Role.SENDER, DRSConfig(floor=64 * KiB, cap=1 << 30))
    drs.on_sample(Sample(peer_window=1 << 29, cwnd_bytes=4 * MiB), now=0.0, rtt=0.0005)
    for now in (0.010, 0.020, 0.030):
        drs.on_sample(Sample(peer_window=1 << 29, cwnd_bytes=1 * MiB), now=now, rtt=0.0005)
        assert drs.window == 3 * MiB  # 0.75 x the 4 MiB peak
    drs.on_sample(Sample(peer_window=1 << 29, cwnd_bytes=1 * MiB), now=0.050, rtt=0.0005)
    assert drs.window == int(0.75 * 3 * MiB)  # one shrink step (0.75x) toward 0.75 MiB


# -- a queue is the latest RTT above 1.25x the minimum (DESIGN 5) --

def test_rtt_jitter_of_20_percent_is_no_queue():
    """Latest RTTs up to 1.2x the minimum: slow start goes on (2x)."""
    drs = started()
    t, total, _ = feed(drs, lambda i: 256 * KiB * 2 ** i, 2)

    def flight(i):
        return 1 * MiB * 2 ** i

    _, _, windows = feed(drs, flight, 5, rtt=0.12, t=t, total=total)
    assert not drs.queue_seen and drs.slow_start
    assert all(b >= 1.9 * a for a, b in pairwise(windows))  # the window doubles per RTT


def test_an_rtt_30_percent_above_the_minimum_is_a_queue():
    rate = 12.5e6  # 100 Mbit/s, 100 ms
    drs = started()
    feed(drs, lambda i: 256 * KiB * 2 ** i, 2)
    assert not drs.queue_seen
    t, total, _ = feed(drs, lambda i: rate * 0.1, 4)
    feed(drs, lambda i: rate * 0.13, 20, rtt=0.13, t=t, total=total)
    assert drs.queue_seen and not drs.slow_start
    assert 1.2 * rate * 0.1 <= drs.window <= 1.3 * rate * 0.1  # pulled toward 1.25 x rate x min_rtt


# -- slow start, once left for a queue, is over for good (DESIGN 5, as TCP's ssthresh) --

def test_after_a_queue_drains_a_rising_rate_is_not_doubling_again():
    drs = started()
    rate = 12.5e6
    t, total, _ = feed(drs, lambda i: 256 * KiB * 2 ** i, 3)
    t, total, _ = feed(drs, lambda i: rate * 0.1, 2, t=t, total=total)
    t, total, _ = feed(drs, lambda i: rate * 0.14, 2, rtt=0.14, t=t, total=total)
    assert drs.queue_seen and not drs.slow_start
    # the queue drains (RTT back at its minimum) and the rate doubles per RTT
    start = drs.window
    _, _, windows = feed(drs, lambda i: rate * 0.1 * 2 ** (i + 1), 4, t=t, total=total)
    assert not drs.slow_start
    for before, after in zip([start] + windows, windows):
        assert after <= 1.25 * before + 1  # the steady gain per RTT, not 2x


# -- shrinking: at most 0.75x per RTT, after the 4-RTT hold (DESIGN 6) --

def test_default_shrink_is_at_most_a_quarter_per_rtt_after_a_4_rtt_hold():
    drs = started()
    t, total, _ = feed(drs, lambda i: 256 * KiB * 2 ** i, 4)
    t, total, peak = feed(drs, lambda i: 4 * MiB, 6, t=t, total=total)
    top = peak[-1]
    _, _, windows = feed(drs, lambda i: 64 * KiB, 12, t=t, total=total)  # the flight collapses
    assert windows[:3] == [top] * 3  # held (4 RTTs of measurements, the newest counts)
    falling = [w for w in windows if w < top]
    assert falling[0] >= 0.75 * top  # the hold ends mid-RTT: half a step
    ratios = [b / a for a, b in pairwise(falling)]
    assert len(ratios) >= 6
    assert all(r == pytest.approx(0.75, abs=0.01) for r in ratios)  # one full step per RTT
