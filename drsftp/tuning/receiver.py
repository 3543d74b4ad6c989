"""DRS's receiver rule, sans-IO ("Dynamic Right-Sizing in the Linux kernel",
sec. III.A): the data received in one round trip is a lower bound on the
sender's congestion window.  Measure it every period of at least one RTT,
keep the largest recent measurement, and allow about twice that while the
sender is still doubling (slow start; sec. III.B: the receiver uses the
sender's doubling factor) so the window never limits it; once growth is
additive, the measurement plus headroom suffices ("Dynamic Right-Sizing: a
simulation study", sec. II: awnd >= 2 cwnd in slow start, > cwnd after).

Departures from the papers, each a rule in docs/DESIGN.md#the-drs-controller:
a sliding measurement normalised to one smoothed RTT; a queue guard that
pulls the window toward 1.25 x rate x min_rtt when the RTT inflates; slow
start told by the delivery rate, not the flight; the lead
(:meth:`DRSReceiver._lead`); room past a hole while losses recur
(:meth:`DRSReceiver._recovery_room`); a floor that follows a slow path
(slowfloor.py); a floor on short paths (:meth:`DRSReceiver._cpu_floor`);
and the open start (:meth:`DRSReceiver.before_handshake`).
"""

from __future__ import annotations

from collections import deque

from .base import NO_CHANGE, Decision, Role, Sample
from .drs import DRSConfig, DRSTuning, _rate_before, _rate_since
from .slowfloor import SlowFloor


class DRSReceiver(DRSTuning, role=Role.RECEIVER):
    """The receive window: TCP_WINDOW_CLAMP and SO_RCVBUF (the controller's)."""

    def __init__(self, role: Role, config: DRSConfig | None = None) -> None:
        super().__init__(role, config)
        self.queue_seen = False  # the pipe has been full once: no more doubling
        self.measurements: deque[tuple[float, float, float]] = deque()  # (time, bytes per RTT, rate)
        self._last_tick: float | None = None
        self._changed_at = 0.0  # when the window last changed
        self._out_of_order: int | None = None  # cumulative out-of-order packets
        self._recovery_until = float("-inf")  # loss recovery's room lasts until then
        self._hole_at = float("-inf")  # out-of-order arrivals last grew then
        self._asked_end = 0  # bytes_received once what the application asked has come (expect)
        cfg = self.config
        self._slow = SlowFloor(cfg.floor, gain=cfg.slow_floor_gain, least=cfg.slow_floor_least,
                               keep=cfg.slow_floor_keep, delay=cfg.slow_floor_delay, step=cfg.shrink_step,
                               threshold=cfg.change_threshold, filled=cfg.cwnd_limited)

    # -- the handshake: open start ----------------------------------------
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
        shorter paths.  (The kernel paper, sec. III.C, asks for the window
        scale of the largest buffer at connection setup: the offer sets it.)"""
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
        return cfg.open_start and rtt is not None and rtt >= cfg.open_start_min_rtt

    # -- every tick -------------------------------------------------------
    def _decide(self, sample: Sample, now: float) -> Decision:
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
        size = self._step(max(target, self._cpu_floor(), self._demand(sample.bytes_received)), cfg.shrink_step ** frac,
                          floor)
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

    def expect(self, at: int, more: int) -> None:
        """The last request's (one at a time on a connection); a larger one
        than ``demand_max`` is DRS's to ramp (:meth:`_demand`); 0: none."""
        self._asked_end = at + more if more <= self.config.demand_max else at

    def _demand(self, received: int) -> int:
        """The bytes a request of ``demand_max`` at most asked that have not
        come (docs/DESIGN.md#drs-demand).  A kept-alive HTTP connection
        carries a burst a request: what arrives per RTT is what the window
        let through, so 1.25x it is a fixed point below a burst larger than
        the window (a 1 MiB file in two round trips on a 100 ms path); the
        request says how much can come at once.  A larger one is a flow for
        DRS to ramp (:meth:`expect` clears it): parallel streams each
        opened to it together let their slow starts overshoot the queue."""
        return max(self._asked_end - received, 0)

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

    def _emit(self, size: int) -> Decision:
        """The window ``size`` unless :meth:`_same`.  The other direction of
        an FTP data connection carries only ACKs: its buffer stays small
        instead of the kernel default (128 KiB+)."""
        if self._same(size):
            return NO_CHANGE
        self.window = size
        self.applied = True
        return Decision(rcv_window=self.window, sndbuf=self.config.ack_buffer)
