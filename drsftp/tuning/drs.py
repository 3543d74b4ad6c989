"""Dynamic Right-Sizing (Fisk & Feng; Weigle & Feng, LANL), sans-IO.

Receiver rule (DRS paper, sec. 3): the data received in one round trip is a
lower bound on the sender's congestion window.  Measure it every period of
at least one RTT, keep the largest recent measurement, and allow about twice
that while the sender is still doubling (slow start) so the window never
limits it; once growth is additive, the measurement plus headroom suffices.
The sender's buffer follows the window the receiver allows (DRS FTP: the
peers exchange both over the control channel).

Departures from the papers, each a rule in docs/DESIGN.md#the-drs-controller:
a sliding measurement normalised to one smoothed RTT; a queue guard that
pulls the window toward 1.25 x rate x min_rtt when the RTT inflates; slow
start told by the delivery rate, not the flight; a hold of ``hold_periods``
RTTs and steps of ``shrink_step`` down; room past a hole while losses recur
(:meth:`DRSTuning._recovery_room`); the open start
(:meth:`DRSTuning.before_handshake`); a growing sender's cwnd headroom; and
the sender's unsent data bounded apart from its buffer
(:meth:`DRSTuning._unsent`).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Reversible
from dataclasses import dataclass

from .base import NO_CHANGE, Decision, PeerReport, Role, Sample, Tuning, parse_buffer, register
from .climb import queued
from .slowfloor import SlowFloor

KiB = 1024
MiB = 1024 * KiB


@dataclass(frozen=True)
class DRSConfig:
    floor: int = 256 * KiB  # never allow less (also covers app read jitter) until a slow path is known:
    slow_floor_gain: float = 4.0  # ... then this x held rate x base RTT (slowfloor.SlowFloor) ...
    slow_floor_least: int = 8 * 1448  # ... at least eight segments (docs/DESIGN.md#drs-clamp) ...
    slow_floor_keep: float = 2 / 3  # ... while the rate stays above this x its best
    slow_floor_delay: float = 0.025  # ... base RTTs below this count as this: a reader's stalls
    cap: int = 64 * MiB  # administrative maxwnd for one connection
    slow_start_gain: float = 2.0  # sender doubling: allow 2x (DRS paper)
    steady_gain: float = 1.25  # additive growth: measurement + 25 %
    recovery_window: float = 3.0  # x rate x min_rtt while losses recur (see _recovery_room)
    recovery_periods: int = 16  # ... for this many RTTs after the last out-of-order arrival
    sender_gain: float = 0.75  # SO_SNDBUF per byte that can be in flight (kernel doubles: 1.5x)
    sender_growth: float = 1.5  # a growing sender's cwnd headroom: one tick of slow start
    unsent_time: float = 0.02  # unsent data past the flight: this many seconds at cwnd / srtt (2 x app_delay)
    unsent_floor: int = 64 * KiB  # ... and at least this (one GSO super-packet)
    growth_seen: float = 1.5  # a period this much above the last = doubling
    lead_gain: float = 1.75  # ... and allow this x it x the base RTT
    lead_ticks: int = 8  # slow start: tick and measure the arrival rate every srtt / this (see _lead; 0: no lead)
    hold_periods: int = 4  # keep the peak this many periods before shrinking
    shrink_step: float = 0.75  # shrink by at most this factor per period
    inflation_limit: float = 1.25  # RTT / min_rtt above this = queue filling
    queue_cap_gain: float = 1.25  # then pull the window toward this x rate x min_rtt
    cwnd_limited: float = 0.8  # peer in flight / peer cwnd above this = cwnd-limited
    peer_report_ttl: float = 2.0  # peer reports older than this many RTTs are stale
    min_period: float = 0.002  # measurement period floor (seconds)
    app_delay: float = 0.010  # RTTs below this count as this: the reader's scheduling delay
    default_rtt: float = 0.05  # until a sample arrives
    change_threshold: float = 1 / 16  # smaller changes are not worth a syscall
    ack_buffer: int = 16 * KiB  # the direction that carries only ACKs
    open_start: bool = True  # offer the cap at the handshake (see before_handshake)
    open_start_min_rtt: float = 0.04  # ... on paths at least this long (control RTT)
    cpu_floor: int = 4 * MiB  # receive window at least this on short paths (see _cpu_floor)
    cpu_floor_rtt: float = 0.01  # ... paths whose min RTT is below this

    def __post_init__(self) -> None:
        if not 0 < self.floor <= self.cap:
            raise ValueError("need 0 < floor <= cap")


class RTTEstimator:
    """Smoothed and minimum RTT (RFC 6298 sec. 2 smoothing, alpha = 1/8)."""

    def __init__(self) -> None:
        self.srtt: float | None = None
        self.min_rtt: float | None = None
        self.latest: float | None = None

    def update(self, rtt: float | None) -> None:
        if rtt is None or not 0 < rtt < 60:
            return
        self.latest = rtt
        self.srtt = rtt if self.srtt is None else self.srtt + (rtt - self.srtt) / 8
        self.min_rtt = rtt if self.min_rtt is None else min(self.min_rtt, rtt)


class DRSTuning(Tuning):
    name = "drs"

    def __init__(self, role: Role, config: DRSConfig | None = None) -> None:
        super().__init__(role)
        self.config = config or DRSConfig()
        self.rtt = RTTEstimator()
        self.window = self.config.floor  # last decision (rcv window or sndbuf)
        self.notsent: int | None = None  # sender: last unsent allowance (TCP_NOTSENT_LOWAT)
        self.applied = False
        self.slow_start = True
        self.queue_seen = False  # the pipe has been full once: no more doubling
        self.measurements: deque[tuple[float, float, float]] = deque()  # receiver: (time, bytes per RTT, rate)
        self._rates: deque[tuple[float, float]] = deque()  # sender: (time, acked rate)
        self._history: deque[tuple[float, int]] = deque()  # (time, bytes received)
        self._needs: deque[tuple[float, float]] = deque()  # sender: (time, bytes it may have in flight)
        self._last_tick: float | None = None
        self._changed_at = 0.0  # receiver: when the window last changed
        self._out_of_order: int | None = None  # receiver: cumulative out-of-order packets
        self._recovery_until = float("-inf")  # receiver: loss recovery's room lasts until then
        self._hole_at = float("-inf")  # receiver: out-of-order arrivals last grew then
        self._peer: PeerReport | None = None
        self._peer_time = float("-inf")
        cfg = self.config
        self._slow = SlowFloor(cfg.floor, gain=cfg.slow_floor_gain, least=cfg.slow_floor_least,
                               keep=cfg.slow_floor_keep, delay=cfg.slow_floor_delay, step=cfg.shrink_step,
                               threshold=cfg.change_threshold, filled=cfg.cwnd_limited)

    # -- events -----------------------------------------------------------
    def before_handshake(self, *, rtt: float | None = None) -> Decision:
        """Open start (docs/DESIGN.md#open-start): offer ``cap`` at the
        handshake, so the kernel's first window, window_clamp and
        rcv_ssthresh come from it; :meth:`after_handshake` locks the buffer
        small before any data.  A raised clamp then lifts the window at once
        up to the offered window (docs/DESIGN.md#kf-clamp-lifts), where a
        buffer locked small from the start ramps at the kernel's per-segment
        pace (docs/DESIGN.md#kf-locked-ramp).  Only on paths whose RTT
        (``rtt``: the control connection's) is at least
        ``open_start_min_rtt``: the offered window also lets the sender's
        startup overshoot through, which costs more than the locked ramp on
        shorter paths."""
        return Decision(rcv_window=self.config.cap) if self._opens(rtt) else NO_CHANGE

    def after_handshake(self, *, rtt: float | None = None) -> Decision:
        """Lock the buffer small before the first byte: the open start's
        second half.  After a closed start nothing: the first tick sets the
        floor, through the server's budget.  The receive side only: a
        server's passive socket learns its direction later, and a send
        buffer locked now would stay locked where the sender leaves it to
        kernel autotuning."""
        if not self._opens(rtt):
            return NO_CHANGE
        self._emit(self.config.floor)
        return Decision(rcv_window=self.config.floor)

    def _opens(self, rtt: float | None) -> bool:
        cfg = self.config
        return (self.role is Role.RECEIVER and cfg.open_start and rtt is not None
                and rtt >= cfg.open_start_min_rtt)

    def on_peer_report(self, report: PeerReport, *, now: float, rtt: float | None) -> None:
        self._peer, self._peer_time = report, now
        self.rtt.update(report.rtt)  # the sender's TCP RTT beats our estimates

    def on_sample(self, sample: Sample, *, now: float, rtt: float | None) -> Decision:
        if not self._fresh_peer_rtt(now):
            self.rtt.update(rtt)
        if self.role is Role.RECEIVER:
            return self._receiver(sample, now)
        return self._sender(sample, now)

    def tick_interval(self, *, rtt: float | None) -> float:
        """Half an RTT, so the sliding measurement never lags a doubling
        sender by more than that; ``1 / lead_ticks`` of one in slow start,
        so the lead is never staler (docs/DESIGN.md#drs-lead); never faster
        than ``app_delay``: below it
        the window is sized from the application's scheduling delay, not the
        RTT, and each tick costs both ends CPU (docs/decisions/0007-five-ms-ticks.md)."""
        srtt = self.rtt.srtt or rtt or self.config.default_rtt
        per_rtt = self.config.lead_ticks if self.slow_start and self.config.lead_ticks else 2
        return min(max(srtt / per_rtt, self.config.app_delay), 0.25)

    # -- receiver ---------------------------------------------------------
    def _receiver(self, sample: Sample, now: float) -> Decision:
        """Sliding measurement: the bytes received over the last smoothed RTT,
        re-evaluated every tick, so the window never lags the sender by more
        than a tick (a tumbling period would lag up to a whole RTT)."""
        cfg = self.config
        srtt = self.rtt.srtt or cfg.default_rtt
        rate = self._rate(sample.bytes_received, now, max(srtt, cfg.min_period))
        if rate is None:
            return self._emit(cfg.floor) if not self.applied else NO_CHANGE
        # bytes per RTT: a lower bound on the sender's cwnd.  Below ``app_delay``
        # the window must also absorb the reading application's scheduling
        # delay (docs/DESIGN.md#drs-measure).
        horizon = max(srtt, cfg.app_delay)
        measured = rate * horizon
        # The sender's own report beats the inference: its bytes in flight
        # are exact, and when its cwnd is what limits it (Reno/CUBIC), the
        # cwnd is the real value DRS infers a lower bound of.  A BBR cwnd is
        # a cap ~2x above its flight, so it is used only when it binds.
        inflight = self._fresh_peer_value("inflight", now)
        peer_cwnd = self._fresh_peer_value("cwnd", now)
        if inflight:
            measured = max(measured, float(inflight))
            if peer_cwnd and inflight >= cfg.cwnd_limited * peer_cwnd:
                measured = max(measured, float(peer_cwnd))

        # Slow start: this RTT's delivery rate is well above the one an RTT
        # ago.  The rate, not the flight: a filling queue grows the flight
        # (and the RTT) while the rate stays at the bottleneck's; BBR's
        # "filled pipe" estimate tests the rate the same way
        # (draft-ietf-ccwg-bbr, Startup).
        recent = self.measurements
        prev = _rate_before(recent, now - srtt)
        rate_growing = prev is None or rate >= cfg.growth_seen * prev
        # Runaway guard (docs/DESIGN.md#drs-queue-guard, #kf-queue-runaway): an
        # RTT well above its minimum is a queue filling: the pipe is full.
        # Like TCP's ssthresh, leave slow start for good then (a jump after a
        # drain is not doubling).  The latest sample, not srtt: kernel RTTs
        # are smoothed already, and a second smoothing sees a queue late and
        # keeps the first, inflated samples (docs/DESIGN.md#kf-first-rtt).
        queue = self._queue_filling(srtt)
        self.queue_seen = self.queue_seen or queue
        self.slow_start = not self.queue_seen and rate_growing
        recent.append((now, measured, rate))
        while recent and recent[0][0] < now - self._hold_span(srtt):
            recent.popleft()
        peak = max(m for _, m, _ in recent)
        min_rtt, latest = self.rtt.min_rtt, self.rtt.latest or srtt
        if self.slow_start and min_rtt and cfg.lead_ticks:
            peak = max(peak, self._lead(now, srtt, min_rtt))
        gain = cfg.slow_start_gain if self.slow_start else cfg.steady_gain
        target = gain * peak
        if queue and min_rtt:  # (queue: a minimum RTT is known)
            # allow no more than 1.25 x rate x min_rtt.  Pull down, not just
            # hold: with a standing queue the flight (and so the measurement)
            # includes the queue and would justify itself.
            target = min(target, cfg.queue_cap_gain * rate * max(min_rtt, cfg.app_delay))
        # At most one phase's gain of growth and one shrink step per RTT: a
        # burst of in-order bytes released after loss recovery is no doubling.
        # (The smaller of srtt and the latest sample: a second smoothing of
        # kernel RTTs keeps early, inflated samples for many ticks.)
        span = min(srtt, latest)
        frac = min((now - self._last_tick) / span, 1.0) if self._last_tick else 1.0
        self._last_tick = now
        if cfg.shrink_step ** frac > 1 - cfg.change_threshold or gain ** frac < 1 + cfg.change_threshold:
            # A tick's step under the change threshold is never applied and,
            # at RTTs past ~1 s (ticks stop at 0.25 s), would hold the window
            # for good: count the step from the last change then.
            frac = min(max(frac, (now - self._changed_at) / span), 1.0)
        recovering = self._recovering(sample, now, srtt, congested=queue)
        floor = cfg.floor  # until the pipe was seen full; then one that follows a slow path (rule 7)
        if self.queue_seen and min_rtt:
            floor = self._slow.update(self.measurements, self.window, min_rtt, cfg.shrink_step ** frac, now=now,
                                      holes=recovering or now - self._hole_at < self._hold_span(srtt),
                                      hold=self._hold_span(srtt))
        target = min(target, max(self.window * gain ** frac, floor))
        if recovering:
            target = max(target, self._recovery_room(min_rtt or srtt))
        size = self._step(max(target, self._cpu_floor()), cfg.shrink_step ** frac, floor)
        before = self.window
        decision = self._emit(size)
        if self.window != before:
            self._changed_at = now
        return decision

    def _lead(self, now: float, srtt: float, min_rtt: float) -> float:
        """Slow start's flight as it is now, not as it was over the last RTT
        (docs/DESIGN.md#drs-lead; docs/decisions/0025-slow-start-lead.md):
        the arrival rate over the last ``srtt / lead_ticks`` x the base RTT,
        scaled so the target is ``lead_gain`` x it.  A doubling sender's
        flight over the last RTT is 0.72x its flight now, and a window set
        every half RTT is another 1.4x stale by the next tick: 2x that
        measurement held it to ~1.2x a round trip where autotuning doubles.
        The rate cannot pass the bottleneck's, so the lead stays under
        ``lead_gain`` x the base-RTT BDP, within what a one-BDP queue holds."""
        cfg = self.config
        rate = _rate_since(self._history, now - max(srtt / cfg.lead_ticks, cfg.app_delay))
        if not rate:
            return 0.0
        return cfg.lead_gain / cfg.slow_start_gain * rate * max(min_rtt, cfg.app_delay)

    def _cpu_floor(self) -> int:
        """Below ``cpu_floor_rtt`` the right-sized window is rate x
        ``app_delay`` (312 KB at 200 Mbit/s), too small for read batching
        (SO_RCVLOWAT: 1/8 of the window, none under a 512 KiB window, the
        full 512 KiB from 4 MiB), so this reader wakes per burst; 4 MiB cost
        little memory there and cut its CPU by a third (docs/DESIGN.md, "A
        window floor on short paths").  Longer paths keep DRS's window:
        their memory is what DRS saves."""
        min_rtt = self.rtt.min_rtt
        return self.config.cpu_floor if min_rtt is not None and min_rtt < self.config.cpu_floor_rtt else 0

    def _recovering(self, sample: Sample, now: float, srtt: float, *, congested: bool) -> bool:
        """Out-of-order arrivals (a hole: a loss) in the last ``recovery_periods``
        RTTs, not counting holes that come with an inflated RTT: those are
        drops at a full bottleneck queue, and room past them would only let
        the sender overfill it again (docs/decisions/0004-ungated-recovery-room.md)."""
        seen, self._out_of_order = self._out_of_order, sample.out_of_order
        hole = seen is not None and sample.out_of_order is not None and sample.out_of_order > seen
        self._hole_at = now if hole else self._hole_at
        if hole and not congested:
            self._recovery_until = now + self.config.recovery_periods * srtt
        return now < self._recovery_until

    def _recovery_room(self, min_rtt: float) -> float:
        """The window while a hole is repaired (docs/DESIGN.md#drs-loss-recovery):
        ``recovery_window`` x the mean delivery rate over the hold x the base
        RTT.  The window counts from the cumulative ACK (RFC 9293 sec. 3.8.6),
        which stays at the hole about two RTTs (detection: RFC 6675, RFC 8985;
        then the repair), so a sender that keeps sending needs ~2 BDP past it
        plus its share of the queue.  The base RTT and the mean rate (not the
        peak: a repaired hole's in-order burst reads as twice the line rate)
        keep it from growing with a queue
        (docs/decisions/0002-recovery-gain.md: a shorter, guarded form)."""
        rates = [r for _, _, r in self.measurements]
        rate = sum(rates) / len(rates)
        return self.config.recovery_window * rate * max(min_rtt, self.config.app_delay)

    # -- sender -----------------------------------------------------------
    def _sender(self, sample: Sample, now: float) -> Decision:
        cfg = self.config
        peer_window = self._fresh_peer_value("window", now)
        if peer_window is None:
            peer_window = sample.peer_window
        srtt = self.rtt.srtt or cfg.default_rtt
        cwnd: float | None = sample.cwnd_bytes
        # Slow start, as the receiver tells it: the acked rate grew this RTT
        # and no queue inflates the RTT.  Then the cwnd outgrows a buffer
        # sized from the last tick's cwnd before the next tick, and the
        # receiver's report lags a round trip (docs/DESIGN.md#drs-sender):
        # allow one tick's growth,
        # within the window the kernel says the receiver offers.  A cwnd
        # growing at a flat rate or into a queue (BBR overshooting) gets none.
        rate = self._rate(sample.bytes_acked, now, max(srtt, cfg.min_period))
        recent = self._rates
        prev = _rate_before(recent, now - srtt)
        if rate is not None:
            recent.append((now, rate))
        while recent and recent[0][0] < now - 2 * srtt:
            recent.popleft()
        sent_rate = cwnd / max(srtt, cfg.min_period) if cwnd else None  # before the growth headroom
        self.slow_start = bool(cwnd and rate and prev and rate >= cfg.growth_seen * prev
                               and not self._queue_filling(srtt))
        if self.slow_start and cwnd:
            if sample.peer_window:
                peer_window = max(peer_window or 0, sample.peer_window)
            cwnd = cfg.sender_growth * cwnd
            if peer_window:
                peer_window = cfg.sender_growth * peer_window
        # In flight can never exceed min(cwnd, peer window): the buffer
        # holds that plus headroom for data queued behind it.  The cwnd
        # counts only what is in the network; SACKed and lost segments stay
        # in the buffer too until the cumulative ACK passes them (loss
        # recovery), within the same peer window.
        if cwnd and sample.held_bytes:
            cwnd += sample.held_bytes
        known = [v for v in (peer_window, cwnd) if v]
        need = min(known) if known else 0
        if need <= 0:
            return NO_CHANGE if self.applied else self._emit(cfg.floor)
        self._needs.append((now, need))
        while self._needs[0][0] < now - self._hold_span(srtt):
            self._needs.popleft()
        size = self._step(cfg.sender_gain * max(m for _, m in self._needs), cfg.shrink_step)
        return self._emit(size, self._unsent(size, sent_rate))

    def _unsent(self, size: int, sent_rate: float | None) -> int:
        """The unsent data to keep queued behind the flight: ``unsent_time``
        at the rate the cwnd lets the sender send (cwnd / srtt; BBR's
        startup paces at about that, and it does not jump when a repaired
        hole acknowledges a window at once, as the acked rate does), the
        sending thread's wakeup latency with room: a writer blocked on
        TCP_NOTSENT_LOWAT wakes when half of it is left.  Never more than
        the buffer decision.  A send buffer of 1.5 x the flight is what
        keeps a writer woken on Linux (docs/DESIGN.md#kf-write-space), but
        past the flight that memory would hold unsent data the window cannot
        take yet (docs/DESIGN.md#drs-unsent;
        docs/decisions/0005-acked-rate-unsent-allowance.md)."""
        if not sent_rate:
            return size
        return int(min(size, max(self.config.unsent_time * sent_rate, self.config.unsent_floor)))

    # -- helpers ----------------------------------------------------------
    def _hold_span(self, srtt: float) -> float:
        """How long a peak is held: ``hold_periods`` RTTs, ``app_delay``
        periods at least, so the hold is never shorter than a tick and the
        sender's buffer does not follow each tick's cwnd up and down
        (docs/decisions/0007-five-ms-ticks.md)."""
        return self.config.hold_periods * max(srtt, self.config.app_delay)

    def _queue_filling(self, srtt: float) -> bool:
        """The latest RTT well above the minimum: a bottleneck queue fills."""
        min_rtt, latest = self.rtt.min_rtt, self.rtt.latest or srtt
        return bool(min_rtt) and queued(latest, min_rtt, self.config.inflation_limit, 0.0)

    def _rate(self, total: int, now: float, span: float) -> float | None:
        """Record the cumulative ``total``; bytes/s over the last ``span``
        seconds (None until that much history exists)."""
        hist = self._history
        hist.append((now, total))
        # keep one entry at least one span old, drop the older ones
        while len(hist) > 2 and hist[1][0] <= now - span:
            hist.popleft()
        return _rate_since(hist, now - span)

    def _step(self, target: float, shrink: float, floor: int | None = None) -> int:
        """Clamp to [floor, cap] (the fixed floor unless given); grow at once,
        shrink by at most ``shrink``."""
        cfg = self.config
        if target < self.window:
            target = max(target, self.window * shrink)
        return int(min(max(target, cfg.floor if floor is None else floor), cfg.cap))

    def _emit(self, size: int, notsent: int | None = None) -> Decision:
        at_bound = size in (self.config.floor, self.config.cap) and size != self.window
        same = self.applied and not at_bound and _near(size, self.window, self.config.change_threshold)
        if same and (notsent is None or _near(notsent, self.notsent, self.config.change_threshold)):
            return NO_CHANGE
        if not same:
            self.window = size
        self.applied = True
        # The other direction of an FTP data connection carries only ACKs:
        # keep its buffer small instead of the kernel default (128 KiB+).
        ack = self.config.ack_buffer
        if self.role is Role.RECEIVER:
            return Decision(rcv_window=self.window, sndbuf=ack)
        self.notsent = notsent if notsent is not None else self.window
        return Decision(rcv_window=ack, sndbuf=self.window, notsent=self.notsent)

    def _fresh(self, now: float) -> bool:
        srtt = self.rtt.srtt or self.config.default_rtt
        return now - self._peer_time <= max(self.config.peer_report_ttl * srtt, 0.5)

    def _fresh_peer_rtt(self, now: float) -> bool:
        return self._peer is not None and self._peer.rtt is not None and self._fresh(now)

    def _fresh_peer_value(self, field: str, now: float) -> float | None:
        if self._peer is None or not self._fresh(now):
            return None
        value: float | None = getattr(self._peer, field)
        return value

    def describe(self) -> str:
        return f"{self.name}(cap={self.config.cap})"


def _near(value: float, last: float | None, threshold: float) -> bool:
    """Within ``threshold`` (a fraction) of ``last``: not worth a syscall."""
    return last is not None and abs(value - last) <= threshold * last


def _rate_since(hist: deque[tuple[float, int]], start: float) -> float | None:
    """Bytes/s from ``start`` to the newest of the (time, cumulative bytes)
    entries, the bytes at ``start`` interpolated between the entries around
    it; None when no entry is that old."""
    now, total = hist[-1]
    older = [k for k, (t, _) in enumerate(hist) if t <= start + 1e-9 * (now - start)]
    if not older or now <= start:
        return None
    k = older[-1]
    t0, b0 = hist[k][0], float(hist[k][1])
    if k + 1 < len(hist) and hist[k + 1][0] > t0:
        t1, b1 = hist[k + 1]
        b0 += (b1 - b0) * min(max((start - t0) / (t1 - t0), 0.0), 1.0)
        t0 = max(t0, start)
    return max(total - b0, 0) / (now - t0)


def _rate_before(recent: Reversible[tuple[float, ...]], when: float) -> float | None:
    """The rate (each entry's last field) of the newest entry at or before ``when``."""
    return next((e[-1] for e in reversed(recent) if e[0] <= when), None)


def _config(arg: str | None, **kw: bool) -> DRSConfig:
    if arg:
        cap = parse_buffer(arg)
        return DRSConfig(cap=cap, floor=min(DRSConfig.floor, cap), **kw)
    return DRSConfig(**kw)


@register("drs")
def _drs(role: Role, arg: str | None) -> Tuning:
    """``drs`` or ``drs:CAP`` (per-connection cap, e.g. drs:32MiB)."""
    return DRSTuning(role, _config(arg))


@register("drs-closed")
def _drs_closed(role: Role, arg: str | None) -> Tuning:
    """DRS without the open start: right-sized from the first byte, so the
    window also holds back slow start's overshoot (fewer losses, a smaller
    peak buffer), at the price of the locked buffer's slow ramp on long fat
    paths (docs/DESIGN.md#open-start)."""
    t = DRSTuning(role, _config(arg, open_start=False))
    t.name = "drs-closed"
    return t
