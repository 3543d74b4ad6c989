"""One data socket's buffer control, sans-IO (docs/DESIGN.md#socket-controller).

:class:`SocketController` takes the host's limits, TCP_INFO snapshots (the
dicts ``drsftp.io.sockopt.tcp_info`` returns), the bytes moved and ``now``, and
returns :class:`SocketActions`: the socket options to set.  It decides who
owns the data direction's buffer (setsockopt or kernel autotuning) and caps
the strategy to match, which RTT samples to trust, what a server's budget
grants, the receive buffer held for a window already offered, the read batch
(SO_RCVLOWAT) and how long a closed sender's queue stays held.  The driver
(``drsftp.io.tuner.SocketTuner``) reads TCP_INFO, calls it and applies the
actions through ``drsftp.io.sockopt``; nothing here touches a socket.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from .actuation import (
    NO_ACTION,
    BufferPlan,
    HostLimits,
    Info,
    SocketActions,
    autotuning_reaches_further,
    from_kernel_memory,
    host_cap,
    kernel_memory,
    queued_bytes,
    read_batch,
    rtt_from_info,
    sample_from_info,
)
from .base import NO_CHANGE, Decision, PeerReport, Role, Sample, Tuning, create
from .budget import BufferBudget
from .drs import DRSTuning
from .wirekeys import BYTES, CWND, INFLIGHT, RATE, RCVBUF, RETRANS, RTT_US, SNDBUF, WND

TIMELINE_LIMIT = 20_000  # samples kept for --json / plots (bounded memory)
DRAIN_MIN_RATE = 64 * 1024  # bytes/s assumed for a closed socket's queue when the last rate was lower
DRAIN_MAX = 60.0  # seconds a closed socket's queue stays held in the budget, at most
RATE_SPAN = 0.05  # seconds between the rate's samples, at least
TICK_DEFAULT = 0.25  # seconds between ticks when the strategy names none
# The RTT the handshake decisions take for a data path nothing measured (a
# third-party transfer's): a long one, so DRS's open start offers its cap
# (docs/DESIGN.md#third-party-path; decision 0019).
UNKNOWN_PATH_RTT = float("inf")


# -- the socket's controller ---------------------------------------------------------
@dataclass
class SocketStats:
    rtt_min: float | None = None
    rtt_max: float | None = None
    rtt_sum: float = 0.0
    rtt_n: int = 0
    retransmits: int = 0
    timeline: list[dict[str, object]] = field(default_factory=list)

    def add_rtt(self, rtt: float | None) -> None:
        if rtt is None:
            return
        self.rtt_min = rtt if self.rtt_min is None else min(self.rtt_min, rtt)
        self.rtt_max = rtt if self.rtt_max is None else max(self.rtt_max, rtt)
        self.rtt_sum += rtt
        self.rtt_n += 1

    @property
    def rtt_avg(self) -> float | None:
        return self.rtt_sum / self.rtt_n if self.rtt_n else None


class SocketController:
    """A tuning strategy bound to one data socket's limits, budget and
    measurements (docs/DESIGN.md#socket-controller).  ``budget_key`` keys
    this socket's flow in ``budget`` (the driver, by default this object)."""

    def __init__(self, spec: str, role: Role, *, limits: HostLimits, allow_force: bool = False,
                 budget: BufferBudget | None = None, budget_key: object = None,
                 batch_reads: bool = True, parallel: bool = False) -> None:
        self.role = role
        self.parallel = parallel  # one of N streams (docs/DESIGN.md#parallel-streams)
        self.limits = limits
        self.allow_force = allow_force and limits.can_force
        self.tuning: Tuning = create(spec, role)
        self.budget = budget
        self.key = self if budget_key is None else budget_key
        # SO_RCVLOWAT (READ_BATCH_*); off where the peer may wait for a
        # reply smaller than the batch, as TLS's close_notify
        self.batch_reads = batch_reads
        self.kernel_owns: str | None = None  # "rcvbuf"/"sndbuf": memory left to kernel autotuning
        self.size_cap: int | None = None  # a ceiling set by the peer (GridFTP's SBUF)
        self._cap_to_host()
        self.plan: BufferPlan | None = None  # the attached socket's (attach)
        self.stats = SocketStats()
        self.started = 0.0
        self.last_info: Info = {}
        self.last_rtt: float | None = None
        self.control_rtt: float | None = None  # measured over the control channel
        self.foreign_path = False  # the data peer is not the control connection's (third-party)
        self.rate = 0.0  # bytes/s over the last tick
        self.handshake_window: int | None = None  # set before the handshake
        self._warned_cap = False
        self._moved = 0
        self._last_rate_sample: tuple[float, int] | None = None
        self._wanted: Decision | None = None  # the strategy's last decision
        self._applied: Decision | None = None  # what the budget let through

    # -- who owns the buffer -------------------------------------------------
    def _cap_to_host(self) -> None:
        """Choose who sizes the data direction's buffer, and cap DRS to what
        that actuation can obtain.  Where kernel autotuning reaches further
        than setsockopt (:func:`autotuning_reaches_further`), no buffer of
        the data direction is set, since setting one stops autotuning for
        good: a receiver keeps DRS's window by TCP_WINDOW_CLAMP alone and
        lets the kernel size the memory behind it; a sender leaves the
        buffer to the kernel and bounds what the application queues past
        the flight with TCP_NOTSENT_LOWAT instead (DRS's send-buffer
        decision as the unsent allowance).  Under a budget (a server's) only
        while the budget can hold the most autotuning may grow to (claimed
        in :meth:`attach`).  Never for one of N parallel streams: N sockets
        multiply what setsockopt can set, and DRS's open start ramps each
        one faster than autotuning's (docs/DESIGN.md#parallel-streams)."""
        if not isinstance(self.tuning, DRSTuning):
            return
        self._config0 = self.tuning.config
        self._leave_to_kernel(
            not self.parallel
            and autotuning_reaches_further(self.limits, self.allow_force, self.role is Role.RECEIVER)
            and (self.budget is None or self.budget.can_claim(self._autotuning_max())))

    def _leave_to_kernel(self, kernel: bool) -> None:
        """Set who owns the data direction's buffer, and DRS's cap to match."""
        receiving = self.role is Role.RECEIVER
        if kernel:
            self.kernel_owns = "rcvbuf" if receiving else "sndbuf"
            rmem = self.limits.tcp_rmem
            host = rmem[2] if receiving and rmem else None  # the clamp's memory ceiling
        else:
            self.kernel_owns = None
            host = host_cap(self.limits, self.allow_force, receiving)
        cfg = self._config0
        for cap in (host, self.size_cap):
            if cap and cap < cfg.cap:
                cfg = replace(cfg, cap=cap, floor=min(cfg.floor, cap))
        if isinstance(self.tuning, DRSTuning):
            self.tuning.config = cfg

    def cap_size(self, size: int | None) -> None:
        """Cap DRS's buffer decisions at ``size`` bytes (SBUF, GFD.20; -P
        auto's window per stream); None: the host's cap alone."""
        self.size_cap = size
        if isinstance(self.tuning, DRSTuning):
            self._leave_to_kernel(self.kernel_owns is not None)

    def _autotuning_max(self) -> int:
        """Kernel memory autotuning may give this socket's data direction."""
        lim = self.limits.tcp_rmem if self.role is Role.RECEIVER else self.limits.tcp_wmem
        return lim[2] if lim else 0

    def _new_plan(self) -> BufferPlan:
        return BufferPlan(self.limits, self.allow_force, kernel_owns=self.kernel_owns, batch_reads=self.batch_reads)

    def force_refused(self) -> None:
        """The driver found FORCE refused (no CAP_NET_ADMIN): plain options
        from now on for this socket."""
        if self.plan is not None:
            self.plan.allow_force = False

    # -- socket lifecycle ------------------------------------------------------
    def note_control_rtt(self, rtt_us: int | None) -> None:
        """The control connection's smoothed RTT (tcpi_rtt, same path): the
        reference for the data connection's first, unreliable samples.
        Ignored on a third-party data path (:meth:`note_foreign_path`)."""
        if rtt_us and not self.foreign_path:
            rtt = rtt_us / 1e6
            self.control_rtt = rtt if self.control_rtt is None else min(self.control_rtt, rtt)

    def note_foreign_path(self) -> None:
        """The data connection's peer is not the control connection's (a
        third-party transfer): the control RTT says nothing about the data
        path (docs/DESIGN.md#third-party-path).  No control RTT replaces the
        data connection's samples, and the handshake takes the path as long
        (UNKNOWN_PATH_RTT): DRS opens."""
        self.foreign_path = True
        self.control_rtt = None

    @property
    def _path_rtt(self) -> float | None:
        """The RTT the handshake decisions take: the control connection's,
        or on a third-party path UNKNOWN_PATH_RTT."""
        return UNKNOWN_PATH_RTT if self.foreign_path else self.control_rtt

    def before_handshake(self, *, reserve_as: object = None) -> SocketActions:
        """Before connect()/listen(): the buffer that fixes the window scale.
        With a budget, a handshake buffer is first reserved in it under
        ``reserve_as`` (released by :meth:`after_handshake`); when the budget
        cannot spare the floor, nothing is set (the kernel default)."""
        if self.kernel_owns == "rcvbuf":
            return NO_ACTION  # no open start: a buffer set now would stop autotuning
        decision = self.tuning.before_handshake(rtt=self._path_rtt)
        if self.budget is not None and reserve_as is not None and decision.rcv_window:
            # set before the handshake, a value V is held as 2 V (no 0.8 factor)
            granted = self.budget.reserve(reserve_as, 2 * decision.rcv_window) // 2
            floor = self.tuning.config.floor if isinstance(self.tuning, DRSTuning) else 0
            if granted < max(floor, 1):
                self.budget.release(reserve_as)
                return NO_ACTION
            decision = replace(decision, rcv_window=granted)
        if decision.is_empty():
            return NO_ACTION
        self.handshake_window = decision.rcv_window
        return self._new_plan().actions(decision, before_handshake=True)

    def after_handshake(self, *, reserved_as: object = None) -> SocketActions:
        """Connected (or accepted), before any data flows."""
        decision = self.tuning.after_handshake(rtt=self._path_rtt)
        actions = NO_ACTION
        if not decision.is_empty():
            actions = self._new_plan().actions(decision)
            self._wanted = self._applied = decision
        if self.budget is not None and reserved_as is not None:
            self.budget.release(reserved_as)
        return actions

    @property
    def static_window(self) -> int | None:
        """The window set before the handshake when no decision followed it
        (a fixed buffer): the read batch is sized from it at attach."""
        return self.handshake_window if self._applied is None else None

    @property
    def read_batch(self) -> int:
        """SO_RCVLOWAT for the window in force (applied, else set before the
        handshake), for a driver that sets the mark itself (MODE E)."""
        window = self._applied.rcv_window if self._applied is not None else None
        window = window or self.handshake_window
        return read_batch(window) if window else 1

    def attach(self, *, now: float, info: Info | None = None) -> SocketActions:
        """The data connection is established (``info``: its TCP_INFO now):
        claim a buffer left to autotuning in the budget (or set buffers
        within a share when it filled since), and start observing.  Under a
        budget the first decision is granted and set now, before the first
        byte, not at the first tick: a buffer not yet set is the kernel's to
        autotune past any grant, for as long as a loaded event loop delays
        that tick (docs/DESIGN.md#budget)."""
        if self.kernel_owns and self.budget is not None and not self.budget.claim(self.key, self._autotuning_max()):
            self._leave_to_kernel(False)
        self.plan = self._new_plan()
        self.started = now
        if self.role is Role.RECEIVER and self.static_window:
            return SocketActions(rcvlowat=self.plan.read_batch_for(self.static_window))  # no later decision will
        if self.budget is not None and not self.kernel_owns:
            return replace(self.tick(info or {}, 0, now=now), next_tick=None)
        return NO_ACTION

    # -- periodic work -----------------------------------------------------------
    def tick(self, info: Info, moved: int, *, now: float) -> SocketActions:
        """Observe, decide: the actions to apply now and the next tick's delay."""
        plan = self.plan
        assert plan is not None, "attach first"
        receiving = self.role is Role.RECEIVER
        sample = sample_from_info(info, moved)  # moved where TCP_INFO lacks the bytes
        rtt = rtt_from_info(info, receiving)
        if rtt is None or (self.control_rtt and rtt < self.control_rtt / 2):
            # The data connection shares the control connection's path: a
            # far smaller RTT is an artefact (rcv_rtt's first samples:
            # docs/DESIGN.md#kf-first-rtt), and as a min_rtt it would poison
            # DRS's queue guard.  (On a third-party path no control RTT is
            # kept: nothing replaces the data connection's own.)
            rtt = self.control_rtt
        self.last_info, self.last_rtt = info, rtt
        # tcpi_rtt is ACK-clocked: meaningful for a sender only
        self.stats.add_rtt(rtt if receiving else (info.get("rtt", 0) / 1e6 or rtt))
        self.stats.retransmits = info.get("total_retrans", self.stats.retransmits)
        decision = self.tuning.on_sample(sample, now=now, rtt=rtt)
        if not decision.is_empty():
            self._wanted = decision
        if self.budget is not None and self._wanted is not None and not self.kernel_owns:
            # re-checked every tick: a share shrinks when other flows arrive;
            # the budget counts kernel memory, as `ss` shows it
            granted = self.budget.limit(self.key, kernel_memory(self._wanted), pinned=plan.held_memory())
            # (the unsent allowance costs no memory of its own: the send buffer bounds it)
            decision = replace(from_kernel_memory(granted), notsent=self._wanted.notsent)
        applied = self._applied or NO_CHANGE
        # only what changed: a sender's decisions carry its constant ACK-side
        # buffer, and each setsockopt is a syscall per tick
        decision = decision.changes_from(applied)
        if decision.rcv_window is None and applied.rcv_window is not None and (
                plan.holding or self.kernel_owns == "rcvbuf"):
            # the receive side again, unchanged: its buffer follows the offered
            # window down, or autotuning, growing the buffer, raised
            # window_clamp with it (tcp_rcv_space_adjust)
            decision = replace(decision, rcv_window=applied.rcv_window)
        actions = NO_ACTION
        if not decision.is_empty():
            self._applied = decision.over(applied)
            actions = plan.actions(decision, offered=info.get("rcv_wnd"))
            if plan.capped and not self._warned_cap:
                self._warned_cap = True
                actions = replace(actions, capped=tuple(plan.capped))
        self._note_rate(now, sample, moved)
        return replace(actions, next_tick=self.tuning.tick_interval(rtt=rtt) or TICK_DEFAULT)

    def _note_rate(self, now: float, sample: Sample, moved: int) -> None:
        moved = max(moved, sample.bytes_received if self.role is Role.RECEIVER else sample.bytes_acked)
        self._moved = moved
        if self._last_rate_sample:
            t0, b0 = self._last_rate_sample
            if now - t0 >= RATE_SPAN:
                self.rate = (moved - b0) / (now - t0)
                self._last_rate_sample = (now, moved)
        else:
            self._last_rate_sample = (now, moved)

    @property
    def timeline_full(self) -> bool:
        return len(self.stats.timeline) >= TIMELINE_LIMIT

    def record(self, now: float, rcvbuf: int, sndbuf: int) -> None:
        """One timeline sample after a tick (the buffers as read back)."""
        if self.timeline_full:
            return
        info = self.last_info
        mss = info.get("snd_mss") or 0
        self.stats.timeline.append({
            "t": round(now - self.started, 4),
            "bytes": self._moved,
            "rate_bps": round(self.rate * 8),
            "rtt_ms": round(self.last_rtt * 1000, 3) if self.last_rtt else None,
            "window": getattr(self.tuning, "window", None),
            "rcvbuf": rcvbuf,
            "sndbuf": sndbuf,
            "cwnd": info.get("snd_cwnd", 0) * mss if mss else None,
            "in_flight": info.get("unacked", 0) * mss if mss else None,
            "peer_window": info.get("snd_wnd"),
        })

    # -- DRS command payloads ------------------------------------------------------
    def report(self, info: Info, buffers: tuple[int, int] | None) -> dict[str, float | int | None]:
        """Our measurements as DRS pairs (``info``: a fresh snapshot;
        ``buffers``: SO_RCVBUF, SO_SNDBUF as read back, None before attach)."""
        self.last_info = info = info or self.last_info
        sender = self.role is Role.SENDER
        mss = info.get("snd_mss") or 0
        rtt_us = info.get("rtt") if sender else None
        if not rtt_us and self.last_rtt:
            rtt_us = int(self.last_rtt * 1e6)
        rcvbuf, sndbuf = buffers or (None, None)
        window = None
        if not sender:
            # The window offered from now on: the decision, or more where the
            # buffer binds at rmem_max (the kernel's rcv_ssthresh then).
            window = max(getattr(self.tuning, "window", 0) or 0, info.get("rcv_ssthresh", 0)) or None
        return {
            RTT_US: rtt_us,
            CWND: info.get("snd_cwnd", 0) * mss if sender and mss else None,
            INFLIGHT: info.get("unacked", 0) * mss if sender and mss else None,
            WND: window or (rcvbuf if not sender else None),
            RATE: self.rate,
            BYTES: info.get("bytes_acked") if sender else info.get("bytes_received"),
            RCVBUF: rcvbuf,
            SNDBUF: sndbuf,
            RETRANS: info.get("total_retrans"),
        }

    def on_peer_report(self, report: PeerReport, *, now: float) -> None:
        self.tuning.on_peer_report(report, now=now, rtt=self.last_rtt)

    def expect(self, info: Info, more: int) -> None:
        """``more`` bytes were asked of the peer (``info``: TCP_INFO now): a
        receiver's window opens for them at its next decision."""
        self.tuning.expect(int(info.get("bytes_received") or 0), more)

    # -- the end -------------------------------------------------------------------
    def close(self, info: Info) -> float | None:
        """The transfer ended (``info``: the socket's last snapshot): give its
        share of the budget back.  Data still queued on a sender's socket is
        the kernel's to send after close() and keeps its memory until
        acknowledged: that much stays held in the budget (counted as a send
        buffer of that size, 2x), and the seconds it should take to drain
        are returned for the driver to call :meth:`release` then."""
        if self.budget is None:
            return None
        queued = queued_bytes(info) if self.role is Role.SENDER else 0
        if not queued:
            self.budget.release(self.key)
            return None
        self.budget.hold(self.key, 2 * queued)
        rtt = self.last_rtt or self.control_rtt or 0.1
        return min(queued / max(self.rate, DRAIN_MIN_RATE) + 2 * rtt, DRAIN_MAX)

    def release(self) -> None:
        """What :meth:`close` kept held has drained: give it back."""
        if self.budget is not None:
            self.budget.release(self.key)
