"""Slow start's lead (docs/DESIGN.md#drs-lead): the receiver sizes its
window from the arrival rate now, and the sender's buffer covers the
window one tick ahead.  A fake clock; the driver ticks as the controller
asks (tick_interval)."""

import math

import pytest

from drsftp.tuning import DRSConfig, DRSTuning, PeerReport, Role, Sample

KiB, MiB = 1024, 1024 * 1024
RTT = 0.1


def _receive(rate_at, seconds, rtt_at=lambda t: RTT, **cfg):
    """Feed a receiver the bytes of an arrival rate ``rate_at(t)`` (bytes/s),
    ticking when it asks; returns its (time, window, rate now) per tick."""
    drs = DRSTuning(Role.RECEIVER, DRSConfig(cap=1 << 30, **cfg))
    drs.on_peer_report(PeerReport(rtt=RTT), now=0.0, rtt=RTT)
    t, total, out = 0.0, 0.0, []
    drs.on_sample(Sample(bytes_received=0), now=t, rtt=RTT)
    while t < seconds:
        step = drs.tick_interval(rtt=RTT)
        # integrate the rate over the step in small pieces
        for k in range(10):
            total += rate_at(t + (k + 0.5) * step / 10) * step / 10
        t += step
        drs.on_peer_report(PeerReport(rtt=rtt_at(t)), now=t, rtt=rtt_at(t))
        drs.on_sample(Sample(bytes_received=int(total)), now=t, rtt=rtt_at(t))
        out.append((t, drs.window, rate_at(t)))
    return drs, out


def _doubling(t):
    return 150e3 * 2 ** (t / RTT)  # ten segments a round trip, doubling


def test_a_doubling_sender_gets_twice_its_flight_now_not_twice_the_last_rtts():
    """The flight over the last RTT is 0.72x the flight now: 2x that is 1.44x
    the flight now.  The lead allows 1.75x the flight over the last eighth
    of an RTT, ~1.68x the flight now."""
    drs, out = _receive(_doubling, 1.0)
    assert drs.slow_start
    late = [(w, r * RTT) for t, w, r in out if t > 0.6]
    assert late and all(w >= 1.6 * flight for w, flight in late)


def test_without_the_lead_the_window_lags_the_doubling_sender():
    """The test above fails the rule without the lead (``lead_ticks=0``:
    2x the bytes of the last RTT, a tick every half RTT)."""
    _, out = _receive(_doubling, 1.0, lead_ticks=0)
    late = [(w, r * RTT) for t, w, r in out if t > 0.6]
    assert late and all(w < 1.5 * flight for w, flight in late)


def test_at_the_bottleneck_the_lead_stays_under_twice_the_base_bdp():
    """Growth ends at the bottleneck's rate; the queue then fills and the RTT
    grows.  The arrival rate cannot pass the bottleneck's, so the lead
    stays within 1.75 x rate x base RTT, under what a one-BDP queue holds."""
    rate = 12.5e6  # 100 Mbit/s
    full = RTT * math.log2(rate / 150e3)  # when doubling reaches it

    def rate_at(t):
        return min(_doubling(t), rate)

    def rtt_at(t):
        return RTT + min(max(t - full, 0.0), 0.1)  # a queue fills over the next 100 ms

    drs, out = _receive(rate_at, full + 1.0, rtt_at=rtt_at)
    assert max(w for _, w, _ in out) <= 2.05 * rate * RTT
    assert not drs.slow_start


def test_slow_start_ticks_eight_times_an_rtt_then_twice():
    drs, _ = _receive(_doubling, 0.5)
    assert drs.slow_start and drs.tick_interval(rtt=RTT) == pytest.approx(RTT / 8)
    flat, _ = _receive(lambda t: 12.5e6, 1.0)
    assert not flat.slow_start and flat.tick_interval(rtt=RTT) == pytest.approx(RTT / 2)
    # never faster than the application's delay (docs/decisions/0007-five-ms-ticks.md)
    assert DRSTuning(Role.RECEIVER).tick_interval(rtt=0.04) == pytest.approx(0.010)


def test_a_growing_sender_buffers_one_tick_past_the_receivers_window():
    """The receiver's window doubles each RTT; a buffer sized to the window
    at the last tick holds the sender back by the growth since.  Growing,
    the buffer covers 1.5x the window (the same tick's headroom as the
    cwnd's); flat, the window itself."""
    def run(growth):
        drs = DRSTuning(Role.SENDER, DRSConfig(floor=64 * KiB, cap=1 << 30, hold_periods=0))
        acked, t = 0, 0.0
        for i in range(12):
            acked += int(64 * KiB * growth ** i)
            window = int(256 * KiB * growth ** i)
            drs.on_sample(Sample(peer_window=window, cwnd_bytes=4 * window, bytes_acked=acked), now=t, rtt=RTT)
            t += drs.tick_interval(rtt=RTT)
        return drs, window

    growing, window = run(1.2)
    assert growing.slow_start and growing.window >= 0.75 * 1.5 * window * 0.95
    flat, window = run(1.0)
    assert not flat.slow_start and flat.window == int(0.75 * window)


def test_the_lead_measures_the_last_eighth_of_an_rtt_at_the_base_rtt():
    """docs/DESIGN.md#drs-lead: the arrival rate over the last eighth of an
    RTT (10 ms at least) x the base RTT; the target 1.75x that, so the peak
    it gives is 1.75 / 2 of it."""
    from collections import deque

    drs = DRSTuning(Role.RECEIVER)
    drs._history = deque([(0.0, 0), (0.9, 0), (0.95, 0), (1.0, 1_000_000)])  # 1 MB in the last 50 ms
    assert drs._lead(1.0, 0.8, 0.8) == pytest.approx(1.75 / 2 * 10e6 * 0.8)  # over 100 ms: 10 MB/s
    assert drs._lead(1.0, 0.04, 0.04) == pytest.approx(1.75 / 2 * 20e6 * 0.04)  # over 10 ms: 20 MB/s
