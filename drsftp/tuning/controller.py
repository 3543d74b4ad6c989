"""One data socket's buffer control, sans-IO (docs/DESIGN.md#socket-controller).

:class:`SocketController` takes the host's limits, TCP_INFO snapshots (the
dicts ``drsftp.sockopt.tcp_info`` returns), the bytes moved and ``now``, and
returns :class:`SocketActions`: the socket options to set.  It decides who
owns the data direction's buffer (setsockopt or kernel autotuning) and caps
the strategy to match, which RTT samples to trust, what a server's budget
grants, the receive buffer held for a window already offered, the read batch
(SO_RCVLOWAT) and how long a closed sender's queue stays held.  The driver
(``drsftp.tuner.SocketTuner``) reads TCP_INFO, calls it and applies the
actions through ``drsftp.sockopt``; nothing here touches a socket.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from .base import NO_CHANGE, Decision, PeerReport, Role, Sample, Tuning, create
from .budget import BufferBudget
from .drs import DRSTuning

Info = Mapping[str, int]  # a TCP_INFO snapshot: struct tcp_info's fields present on this kernel

# The usable receive window is about 1.25 x the SO_RCVBUF value set
# (docs/DESIGN.md#kf-doubling): ask for 0.8 x the window and clamp the
# window itself with TCP_WINDOW_CLAMP.
RCVBUF_PER_WINDOW = 0.8
BUFFER_MIN = 4096  # the least SO_RCVBUF/SO_SNDBUF value set
NOTSENT_MIN = 64 * 1024  # the least unsent data a sender is allowed (one GSO super-packet)
# SO_RCVLOWAT: wake the reader once this much is queued, not per arriving
# burst.  A window's 1/8 at most waits unread (the kernel also wakes the
# reader when the window is about to close, and at EOF: tcp_epollin_ready);
# below 64 KiB it saves nothing; 512 KiB is ~4 ms at 1 Gbit/s.
READ_BATCH_SHARE = 8
READ_BATCH_MIN = 64 * 1024
READ_BATCH_MAX = 512 * 1024
TIMELINE_LIMIT = 20_000  # samples kept for --json / plots (bounded memory)
DRAIN_MIN_RATE = 64 * 1024  # bytes/s assumed for a closed socket's queue when the last rate was lower
DRAIN_MAX = 60.0  # seconds a closed socket's queue stays held in the budget, at most
RATE_SPAN = 0.05  # seconds between the rate's samples, at least
TICK_DEFAULT = 0.25  # seconds between ticks when the strategy names none


@dataclass(frozen=True)
class HostLimits:
    """The host's socket-buffer sysctls and whether FORCE works here
    (read by ``drsftp.sockopt.HostLimits.read``)."""

    rmem_max: int | None
    wmem_max: int | None
    tcp_rmem: tuple[int, ...] | None
    tcp_wmem: tuple[int, ...] | None
    congestion_control: str | None
    can_force: bool

    def as_dict(self) -> dict[str, object]:
        return {
            "net.core.rmem_max": self.rmem_max,
            "net.core.wmem_max": self.wmem_max,
            "net.ipv4.tcp_rmem": list(self.tcp_rmem or ()),
            "net.ipv4.tcp_wmem": list(self.tcp_wmem or ()),
            "net.ipv4.tcp_congestion_control": self.congestion_control,
            "buffer_force_available": self.can_force,
        }


@dataclass(frozen=True)
class SocketActions:
    """Socket options to set, in this order; ``None`` leaves one alone."""

    rcvbuf: int | None = None  # SO_RCVBUF value
    clamp: int | None = None  # TCP_WINDOW_CLAMP
    rcvlowat: int | None = None  # SO_RCVLOWAT (the read batch)
    sndbuf: int | None = None  # SO_SNDBUF value
    notsent_lowat: int | None = None  # TCP_NOTSENT_LOWAT
    force: bool = False  # buffers by SO_*BUFFORCE; refused: the plain option (report it: force_refused)
    next_tick: float | None = None  # seconds until the next tick (tick only)
    capped: tuple[str, ...] = ()  # host limits that cut a buffer: warn once (tick only)

    def is_empty(self) -> bool:
        return all(v is None for v in (self.rcvbuf, self.clamp, self.rcvlowat, self.sndbuf, self.notsent_lowat))


NO_ACTION = SocketActions()


# -- reading TCP_INFO ---------------------------------------------------------
def sample_from_info(info: Info, received_fallback: int = 0) -> Sample:
    mss = info.get("snd_mss") or 0
    return Sample(
        bytes_received=info.get("bytes_received", received_fallback),
        bytes_acked=info.get("bytes_acked", 0),
        cwnd_bytes=info["snd_cwnd"] * mss if "snd_cwnd" in info and mss else None,
        peer_window=info.get("snd_wnd"),
        retransmits=info.get("total_retrans"),
        out_of_order=info.get("rcv_ooopack"),
        held_bytes=(info["sacked"] + info["lost"]) * mss if "lost" in info and mss else None,
    )


def rtt_from_info(info: Info, receiving: bool) -> float | None:
    """The kernel's RTT estimate in seconds: the receiver's own (rcv_rtt)
    when receiving, the ACK-clocked srtt when sending."""
    us = info.get("rcv_rtt") if receiving else info.get("rtt")
    if not us and not receiving:
        return None
    if not us:
        us = info.get("rtt") if info.get("bytes_acked", 0) > 1 else None
    return us / 1e6 if us else None


def queued_bytes(info: Info) -> int:
    """Bytes the kernel still holds to send: unsent plus in flight."""
    return info.get("notsent_bytes", 0) + info.get("unacked", 0) * (info.get("snd_mss") or 0)


# -- what setsockopt can do here ---------------------------------------------------
def kernel_memory(d: Decision) -> Decision:
    """What a decision costs in kernel socket memory (the doubled readback,
    `ss` skmem rb/tb): a window W sets SO_RCVBUF 0.8 W, read back 1.6 W."""
    return Decision(
        rcv_window=None if d.rcv_window is None else int(d.rcv_window * RCVBUF_PER_WINDOW * 2),
        sndbuf=None if d.sndbuf is None else d.sndbuf * 2,
    )


def from_kernel_memory(m: Decision) -> Decision:
    return Decision(
        rcv_window=None if m.rcv_window is None else int(m.rcv_window / (RCVBUF_PER_WINDOW * 2)),
        sndbuf=None if m.sndbuf is None else m.sndbuf // 2,
    )


def host_cap(limits: HostLimits, allow_force: bool, receiving: bool) -> int | None:
    """Largest decision a setsockopt can carry out here (None: no cap): for
    a receiver the window whose SO_RCVBUF (0.8 W) reaches rmem_max, for a
    sender the SO_SNDBUF value wmem_max."""
    if allow_force and limits.can_force:
        return None
    if receiving:
        return int(limits.rmem_max / RCVBUF_PER_WINDOW) if limits.rmem_max else None
    return limits.wmem_max


def autotuning_reaches_further(limits: HostLimits, allow_force: bool, receiving: bool) -> bool:
    """True when kernel autotuning may grow this socket's buffer past any
    setsockopt value here: its limit (tcp_rmem/tcp_wmem max) above what
    SO_RCVBUF/SO_SNDBUF can hold (2 x rmem_max/wmem_max) and no FORCE.
    Setting a buffer turns autotuning off for the socket for good
    (docs/DESIGN.md#kf-autotuning-off), so an adaptive tuning then leaves
    that buffer alone (docs/decisions/0006-buffers-locked-at-rmem-max.md)."""
    if allow_force and limits.can_force:
        return False
    auto, cap = (limits.tcp_rmem, limits.rmem_max) if receiving else (limits.tcp_wmem, limits.wmem_max)
    return bool(auto and len(auto) == 3 and cap and auto[2] > 2 * cap)


# -- one decision into socket options ------------------------------------------------
@dataclass
class BufferPlan:
    """Turns :class:`Decision` values into :class:`SocketActions` for one socket
    (docs/DESIGN.md#socket-actuation), remembering what it set."""

    limits: HostLimits
    allow_force: bool = False
    # "rcvbuf": the receive window by TCP_WINDOW_CLAMP alone, the buffer
    # left to autotuning; "sndbuf": the send buffer left to autotuning, the
    # decision bounding unsent data (TCP_NOTSENT_LOWAT) instead
    kernel_owns: str | None = None
    batch_reads: bool = True  # set SO_RCVLOWAT from the window
    holding: bool = False  # the receive buffer is held above the decision for an offered window
    read_batch: int = 1  # SO_RCVLOWAT as set (1: the kernel's default)
    capped: list[str] = field(default_factory=list)  # host limits that cut a buffer so far
    _memory_window: int | None = None  # the window the live receive buffer was last sized for

    def actions(self, decision: Decision, *, before_handshake: bool = False,
                offered: int | None = None) -> SocketActions:
        """``offered``: the window this socket has already advertised
        (tcpi_rcv_wnd).  A live receive buffer never shrinks below what holds
        the offered window: the kernel never takes an offer back, so the
        sender may still fill it, and after a loss the out-of-order queue
        holds that flight; a buffer cut below it made the kernel prune that
        queue and renege on its SACKs (RFC 2018 sec. 8; docs/DESIGN.md#kf-prune),
        which costs the sender a retransmission timeout
        (docs/decisions/0011-receive-buffer-cut-below-offered-window.md).
        The clamp takes the decision at once; the buffer follows as the
        offered window drains.  It never grows for an offer, only keeps what
        it had (the open start's offer is no flight yet)."""
        rcvbuf = clamp = rcvlowat = sndbuf = notsent = None
        if decision.rcv_window is not None and self.kernel_owns == "rcvbuf":
            if not before_handshake:
                clamp = decision.rcv_window
        elif decision.rcv_window is not None:
            window = decision.rcv_window
            if before_handshake:
                value = window
            else:
                held = self._memory_window
                window_memory = max(window, min(offered, held)) if offered and held else window
                self._memory_window = window_memory
                self.holding = window_memory > window
                value = int(window_memory * RCVBUF_PER_WINDOW)
            rcvbuf, within = self._buffer(value, "rmem_max")
            if not before_handshake:
                # Without this the live window stays where it was
                # (docs/DESIGN.md#kf-rcvbuf-alone).  At rmem_max the buffer
                # binds: a clamp at W would cut the window the buffer gives
                # (docs/DESIGN.md#socket-actuation).
                rmem_max = self.limits.rmem_max
                at_cap = not within and rmem_max and window * RCVBUF_PER_WINDOW >= rmem_max
                clamp = 2 * rmem_max if at_cap and rmem_max else window
        if decision.rcv_window is not None and not before_handshake:
            rcvlowat = self.read_batch_for(decision.rcv_window)  # after the clamp
        if decision.sndbuf is not None and self.kernel_owns != "sndbuf":
            sndbuf, _ = self._buffer(decision.sndbuf, "wmem_max")
        if decision.notsent is not None:  # the unsent data behind the flight, on any host
            notsent = max(int(decision.notsent), NOTSENT_MIN)
        return SocketActions(rcvbuf=rcvbuf, clamp=clamp, rcvlowat=rcvlowat, sndbuf=sndbuf,
                             notsent_lowat=notsent, force=self.allow_force)

    def held_memory(self) -> int:
        """Kernel memory of a receive buffer held above the decision for a
        window already offered (:meth:`actions`), as `ss` shows it; 0 if none."""
        if not self.holding or not self._memory_window:
            return 0
        return int(self._memory_window * RCVBUF_PER_WINDOW * 2)

    def read_batch_for(self, window: int) -> int | None:
        """SO_RCVLOWAT from the receive window (READ_BATCH_*): fewer, larger
        reads (docs/DESIGN.md#rcvlowat); None when it stays as set.  Set
        after the clamp: raising it grows an unlocked buffer and lifts a
        window_clamp below it to it (docs/DESIGN.md#kf-rcvlowat); at 1/8 of
        the window it never reaches the clamp just set."""
        value = min(window // READ_BATCH_SHARE, READ_BATCH_MAX)
        value = value if value >= READ_BATCH_MIN else 1
        if value == self.read_batch or not self.batch_reads:
            return None
        self.read_batch = value
        return value

    def _buffer(self, value: float, limit_name: str) -> tuple[int, bool]:
        """A buffer's value, and False when the host's limit cuts (or meets) it."""
        size = max(int(value), BUFFER_MIN)
        if self.allow_force:
            return size, True
        limit: int | None = getattr(self.limits, limit_name)
        if limit and size > limit and limit_name not in self.capped:
            self.capped.append(limit_name)
        return size, not (limit and size >= limit)


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

    def cap_size(self, size: int) -> None:
        """Cap DRS's buffer decisions at ``size`` bytes (SBUF, GFD.20)."""
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
        reference for the data connection's first, unreliable samples."""
        if rtt_us:
            rtt = rtt_us / 1e6
            self.control_rtt = rtt if self.control_rtt is None else min(self.control_rtt, rtt)

    def before_handshake(self, *, reserve_as: object = None) -> SocketActions:
        """Before connect()/listen(): the buffer that fixes the window scale.
        With a budget, a handshake buffer is first reserved in it under
        ``reserve_as`` (released by :meth:`after_handshake`); when the budget
        cannot spare the floor, nothing is set (the kernel default)."""
        if self.kernel_owns == "rcvbuf":
            return NO_ACTION  # no open start: a buffer set now would stop autotuning
        decision = self.tuning.before_handshake(rtt=self.control_rtt)
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
        decision = self.tuning.after_handshake(rtt=self.control_rtt)
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

    def attach(self, *, now: float) -> SocketActions:
        """The data connection is established: claim a buffer left to
        autotuning in the budget (or set buffers within a share when it
        filled since), and start observing."""
        if self.kernel_owns and self.budget is not None and not self.budget.claim(self.key, self._autotuning_max()):
            self._leave_to_kernel(False)
        self.plan = self._new_plan()
        self.started = now
        if self.role is Role.RECEIVER and self.static_window:
            return SocketActions(rcvlowat=self.plan.read_batch_for(self.static_window))  # no later decision will
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
            # DRS's queue guard.
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
            "rtt_us": rtt_us,
            "cwnd": info.get("snd_cwnd", 0) * mss if sender and mss else None,
            "inflight": info.get("unacked", 0) * mss if sender and mss else None,
            "wnd": window or (rcvbuf if not sender else None),
            "rate": self.rate,
            "bytes": info.get("bytes_acked") if sender else info.get("bytes_received"),
            "rcvbuf": rcvbuf,
            "sndbuf": sndbuf,
            "retrans": info.get("total_retrans"),
        }

    def on_peer_report(self, report: PeerReport, *, now: float) -> None:
        self.tuning.on_peer_report(report, now=now, rtt=self.last_rtt)

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
