"""DRS's sender rule, sans-IO ("Dynamic Right-Sizing in the Linux kernel",
sec. III.B): the sender's buffer follows the window the receiver allows,
which never runs ahead of what the flow can use.  DRS FTP learns that
window over the control channel ("A Comparison of TCP Automatic Tuning
Techniques for Distributed Computing"; docs/PROTOCOL.md), the kernel tells
the one it advertises now, and the sender's own cwnd bounds its flight
("Dynamic Right-Sizing: a simulation study", sec. II: fwnd = min(cwnd,
awnd, maxwnd)).

Departures from the papers, each a rule in docs/DESIGN.md#the-drs-controller:
a growing sender's cwnd headroom (docs/DESIGN.md#drs-sender), and the
unsent data bounded apart from the buffer (:meth:`DRSSender._unsent`).
"""

from __future__ import annotations

from collections import deque

from .base import NO_CHANGE, Decision, Role, Sample
from .drs import DRSConfig, DRSTuning, _near, _rate_before


class DRSSender(DRSTuning, role=Role.SENDER):
    """The send buffer (SO_SNDBUF) and the unsent allowance (TCP_NOTSENT_LOWAT)."""

    def __init__(self, role: Role, config: DRSConfig | None = None) -> None:
        super().__init__(role, config)
        self._rates: deque[tuple[float, float]] = deque()  # (time, acked rate)
        self._needs: deque[tuple[float, float]] = deque()  # (time, bytes it may have in flight)

    # -- every tick -------------------------------------------------------
    def _decide(self, sample: Sample, now: float) -> Decision:
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

    def _emit(self, size: int, notsent: int | None = None) -> Decision:
        """The buffer ``size`` unless :meth:`_same`, and the unsent
        allowance (the buffer when not given) unless it too is near the last.
        The receive direction carries only ACKs: its buffer stays small
        instead of the kernel default (128 KiB+)."""
        same = self._same(size)
        if same and (notsent is None or _near(notsent, self.notsent, self.config.change_threshold)):
            return NO_CHANGE
        if not same:
            self.window = size
        self.applied = True
        self.notsent = notsent if notsent is not None else self.window
        return Decision(rcv_window=self.config.ack_buffer, sndbuf=self.window, notsent=self.notsent)
