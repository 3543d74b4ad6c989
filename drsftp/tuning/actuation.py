"""Socket options for a buffer decision, sans-IO (docs/DESIGN.md#socket-actuation).

What one decision of a tuning strategy (a :class:`Decision`) asks of a socket
on this host: the SO_RCVBUF/SO_SNDBUF values, TCP_WINDOW_CLAMP,
SO_RCVLOWAT and TCP_NOTSENT_LOWAT (:class:`BufferPlan`), what that costs in
kernel memory, what setsockopt can reach here (:class:`HostLimits`), and the
figures a TCP_INFO snapshot gives.  ``drsftp.io.sockopt`` applies the
:class:`SocketActions`; :mod:`.controller` decides when.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from .base import Decision, Sample

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
def read_batch(window: int) -> int:
    """SO_RCVLOWAT for a receive window: its 1/8 within [READ_BATCH_MIN,
    READ_BATCH_MAX], else 1 (the kernel's default; docs/DESIGN.md#rcvlowat)."""
    value = min(window // READ_BATCH_SHARE, READ_BATCH_MAX)
    return value if value >= READ_BATCH_MIN else 1


@dataclass(frozen=True)
class HostLimits:
    """The host's socket-buffer sysctls and whether FORCE works here
    (read by ``drsftp.io.sockopt.HostLimits.read``)."""

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
        value = read_batch(window)
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
