"""Dynamic Right-Sizing (Fisk & Feng; Weigle & Feng, LANL), sans-IO: what
the receiver's rule and the sender's share.

DRS sizes a connection's flow-control window to the sender's congestion
window, so that the cwnd, not a fixed buffer, limits the flow ("Dynamic
Right-Sizing: a simulation study", sec. II: fwnd = min(cwnd, awnd, maxwnd)).
Each end has its own rule, in its own class:

* the receiver (:class:`~drsftp.tuning.receiver.DRSReceiver`) measures the
  sender's cwnd from the bytes that arrive and allows about twice it
  ("Dynamic Right-Sizing in the Linux kernel", sec. III.A);
* the sender (:class:`~drsftp.tuning.sender.DRSSender`) sizes its buffer
  to the window the receiver allows (same paper, sec. III.B), which DRS FTP
  learns over the control channel ("A Comparison of TCP Automatic Tuning
  Techniques for Distributed Computing", DRS FTP).

``DRSTuning(role, config)`` builds the role's class.  Both share what is
here: the configuration, the RTT estimate (the peer's TCP RTT while its
report is fresh), the tick, the byte-rate history, the hold, the queue
test and the step toward a target.  Their departures from the papers are
rules in docs/DESIGN.md#the-drs-controller, named in each class; the one
they share: a peak held ``hold_periods`` RTTs, then steps of
``shrink_step`` down (:meth:`DRSTuning._hold_span`, :meth:`DRSTuning._step`).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Reversible
from dataclasses import dataclass
from typing import Any, ClassVar

from .base import Decision, PeerReport, Role, Sample, Tuning, parse_buffer, register
from .climb import queued

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
    demand_max: int = 4 * MiB  # a request's bytes not yet come, this many at most, open the window (see _demand)

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
    """The state and steps both DRS rules use.  ``DRSTuning(role, config)``
    is the role's rule: each subclass names its role (``role=`` in its class
    statement) and the package imports both (drsftp/tuning/__init__.py)."""

    name = "drs"
    _rules: ClassVar[dict[Role, type[DRSTuning]]] = {}

    def __init_subclass__(cls, *, role: Role, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        DRSTuning._rules[role] = cls

    def __new__(cls, role: Role, config: DRSConfig | None = None) -> DRSTuning:
        rules = DRSTuning._rules[role]
        if not issubclass(rules, cls):
            raise TypeError(f"{cls.__name__} is not the {role.value}'s rule")
        return super().__new__(rules)

    def __init__(self, role: Role, config: DRSConfig | None = None) -> None:
        super().__init__(role)
        self.config = config or DRSConfig()
        self.rtt = RTTEstimator()
        self.window = self.config.floor  # last decision (rcv window or sndbuf)
        self.notsent: int | None = None  # last unsent allowance (a sender's TCP_NOTSENT_LOWAT; None: a receiver)
        self.applied = False
        self.slow_start = True
        self._history: deque[tuple[float, int]] = deque()  # (time, cumulative bytes received or acked)
        self._peer: PeerReport | None = None
        self._peer_time = float("-inf")

    # -- events -----------------------------------------------------------
    def on_peer_report(self, report: PeerReport, *, now: float, rtt: float | None) -> None:
        self._peer, self._peer_time = report, now
        self.rtt.update(report.rtt)  # the sender's TCP RTT beats our estimates

    def on_sample(self, sample: Sample, *, now: float, rtt: float | None) -> Decision:
        if not self._fresh_peer_rtt(now):
            self.rtt.update(rtt)
        return self._decide(sample, now)

    def _decide(self, sample: Sample, now: float) -> Decision:
        """The role's rule for one tick."""
        raise NotImplementedError

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

    # -- helpers ----------------------------------------------------------
    def _hold_span(self, srtt: float) -> float:
        """How long a peak is held: ``hold_periods`` RTTs, ``app_delay``
        periods at least, so the hold is never shorter than a tick and the
        sender's buffer does not follow each tick's cwnd up and down
        (docs/decisions/0007-five-ms-ticks.md).  The simulation study
        (sec. II) shrinks a few RTTs after a decrease, likewise."""
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

    def _same(self, size: int) -> bool:
        """``size`` is within ``change_threshold`` of the window applied:
        not worth a syscall (a bound newly reached always is)."""
        at_bound = size in (self.config.floor, self.config.cap) and size != self.window
        return self.applied and not at_bound and _near(size, self.window, self.config.change_threshold)

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
