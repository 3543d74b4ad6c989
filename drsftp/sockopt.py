"""Socket actuation: the one place that calls setsockopt and reads TCP_INFO.

Linux facts this module respects (docs/DESIGN.md#kernel-facts):
- the window scale is fixed at the handshake from the receive buffer set
  before connect()/listen(), so a DRS socket sets its cap there (open start;
  #kf-wscale);
- SO_RCVBUF alone does not grow a live window: TCP_WINDOW_CLAMP must be
  raised with it, and it lifts the window at once only up to the window
  offered at the handshake (#kf-rcvbuf-alone, #kf-clamp-lifts);
- SO_RCVBUF/SO_SNDBUF are silently capped at rmem_max/wmem_max; the FORCE
  variants (CAP_NET_ADMIN) are not, and are used only when allowed (#kf-caps);
- the kernel doubles the value set, so read back and report what it holds
  (#kf-doubling).
Other platforms get SO_RCVBUF/SO_SNDBUF only and no TCP_INFO.
"""

from __future__ import annotations

import logging
import socket
import struct
import sys
from dataclasses import dataclass, field

from .tuning import Decision, Sample

log = logging.getLogger("drsftp.sockopt")

LINUX = sys.platform.startswith("linux")
# The usable receive window is about 1.25 x the SO_RCVBUF value set
# (docs/DESIGN.md#kf-doubling): ask for 0.8 x the window and clamp the
# window itself with TCP_WINDOW_CLAMP.
RCVBUF_PER_WINDOW = 0.8
SO_RCVBUFFORCE = 33
SO_SNDBUFFORCE = 32
TCP_INFO = getattr(socket, "TCP_INFO", 11)
TCP_WINDOW_CLAMP = getattr(socket, "TCP_WINDOW_CLAMP", 10)
TCP_NOTSENT_LOWAT = getattr(socket, "TCP_NOTSENT_LOWAT", 25)
NOTSENT_MIN = 64 * 1024  # the least unsent data a sender is allowed (one GSO super-packet)
# SO_RCVLOWAT: wake the reader once this much is queued, not per arriving
# burst.  A window's 1/8 at most waits unread (the kernel also wakes the
# reader when the window is about to close, and at EOF: tcp_epollin_ready);
# below 64 KiB it saves nothing; 512 KiB is ~4 ms at 1 Gbit/s.
READ_BATCH_SHARE = 8
READ_BATCH_MIN = 64 * 1024
READ_BATCH_MAX = 512 * 1024


def _read_sysctl(name: str) -> list[int] | None:
    try:
        with open("/proc/sys/" + name.replace(".", "/")) as f:
            return [int(x) for x in f.read().split()]
    except (OSError, ValueError):
        return None


@dataclass(frozen=True)
class HostLimits:
    rmem_max: int | None
    wmem_max: int | None
    tcp_rmem: tuple[int, ...] | None
    tcp_wmem: tuple[int, ...] | None
    congestion_control: str | None
    can_force: bool

    @classmethod
    def read(cls) -> HostLimits:
        r, w = _read_sysctl("net.core.rmem_max"), _read_sysctl("net.core.wmem_max")
        tr, tw = _read_sysctl("net.ipv4.tcp_rmem"), _read_sysctl("net.ipv4.tcp_wmem")
        try:
            with open("/proc/sys/net/ipv4/tcp_congestion_control") as f:
                cc = f.read().strip()
        except OSError:
            cc = None
        return cls(
            r[0] if r else None,
            w[0] if w else None,
            tuple(tr) if tr else None,
            tuple(tw) if tw else None,
            cc,
            _probe_force(),
        )

    def as_dict(self) -> dict:
        return {
            "net.core.rmem_max": self.rmem_max,
            "net.core.wmem_max": self.wmem_max,
            "net.ipv4.tcp_rmem": list(self.tcp_rmem or ()),
            "net.ipv4.tcp_wmem": list(self.tcp_wmem or ()),
            "net.ipv4.tcp_congestion_control": self.congestion_control,
            "buffer_force_available": self.can_force,
        }


def _probe_force() -> bool:
    """True when SO_RCVBUFFORCE works here (CAP_NET_ADMIN)."""
    if not LINUX:
        return False
    with socket.socket() as s:
        try:
            s.setsockopt(socket.SOL_SOCKET, SO_RCVBUFFORCE, 1 << 16)
            return True
        except OSError:
            return False


# struct tcp_info (include/uapi/linux/tcp.h), in order.  Kernels return a
# prefix of it; fields past the returned length are absent, never guessed.
_TCP_INFO_FIELDS = (
    [("state", "B"), ("ca_state", "B"), ("retransmits", "B"), ("probes", "B"),
     ("backoff", "B"), ("options", "B"), ("wscale", "B"), ("flags", "B")]
    + [(n, "I") for n in (
        "rto", "ato", "snd_mss", "rcv_mss", "unacked", "sacked", "lost",
        "retrans", "fackets", "last_data_sent", "last_ack_sent",
        "last_data_recv", "last_ack_recv", "pmtu", "rcv_ssthresh", "rtt",
        "rttvar", "snd_ssthresh", "snd_cwnd", "advmss", "reordering",
        "rcv_rtt", "rcv_space", "total_retrans")]
    + [(n, "Q") for n in ("pacing_rate", "max_pacing_rate", "bytes_acked", "bytes_received")]
    + [(n, "I") for n in ("segs_out", "segs_in", "notsent_bytes", "min_rtt",
                          "data_segs_in", "data_segs_out")]
    + [(n, "Q") for n in ("delivery_rate", "busy_time", "rwnd_limited", "sndbuf_limited")]
    + [("delivered", "I"), ("delivered_ce", "I"), ("bytes_sent", "Q"), ("bytes_retrans", "Q"),
       ("dsack_dups", "I"), ("reord_seen", "I"), ("rcv_ooopack", "I"), ("snd_wnd", "I"),
       ("rcv_wnd", "I")]
)


def _layout():
    offset, out = 0, []
    for name, fmt in _TCP_INFO_FIELDS:
        size = struct.calcsize(fmt)
        offset = (offset + size - 1) // size * size  # natural alignment
        out.append((name, fmt, offset, size))
        offset += size
    return out, offset


_LAYOUT, TCP_INFO_SIZE = _layout()
# the whole struct in one call (the tuner reads it every tick): native
# alignment, as _layout computes it
_WHOLE = struct.Struct("@" + "".join(fmt for _, fmt, _, _ in _LAYOUT))
_NAMES = tuple(name for name, _, _, _ in _LAYOUT)


def parse_tcp_info(raw: bytes) -> dict[str, int]:
    """Fields of struct tcp_info present in ``raw`` (a length-checked prefix)."""
    if len(raw) >= _WHOLE.size:
        info = dict(zip(_NAMES, _WHOLE.unpack_from(raw)))
    else:
        info = {}
        for name, fmt, off, size in _LAYOUT:
            if off + size > len(raw):
                break
            info[name] = struct.unpack_from("=" + fmt, raw, off)[0]
    if "wscale" in info:
        info["snd_wscale"], info["rcv_wscale"] = info["wscale"] & 0xF, info["wscale"] >> 4
    return info


def tcp_info(sock: socket.socket) -> dict[str, int]:
    if not LINUX:
        return {}
    try:
        return parse_tcp_info(sock.getsockopt(socket.IPPROTO_TCP, TCP_INFO, TCP_INFO_SIZE))
    except (OSError, AttributeError):  # closed, or a TLS wrapper without getsockopt
        return {}


def sample_from_info(info: dict[str, int], received_fallback: int = 0) -> Sample:
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


def rtt_from_info(info: dict[str, int], receiving: bool) -> float | None:
    """The kernel's RTT estimate in seconds: the receiver's own (rcv_rtt)
    when receiving, the ACK-clocked srtt when sending."""
    us = info.get("rcv_rtt") if receiving else info.get("rtt")
    if not us and not receiving:
        return None
    if not us:
        us = info.get("rtt") if info.get("bytes_acked", 0) > 1 else None
    return us / 1e6 if us else None


@dataclass
class BufferActuator:
    """Applies :class:`Decision` values to one socket and remembers peaks."""

    sock: socket.socket
    allow_force: bool = False
    limits: HostLimits | None = None
    peak_rcvbuf: int = 0
    peak_sndbuf: int = 0
    capped: list = field(default_factory=list)
    # "rcvbuf": the receive window by TCP_WINDOW_CLAMP alone, the buffer
    # left to autotuning; "sndbuf": the send buffer left to autotuning, the
    # decision bounding unsent data (TCP_NOTSENT_LOWAT) instead
    kernel_owns: str | None = None
    holding: bool = False  # the receive buffer is held above the decision for an offered window
    batch_reads: bool = True  # set SO_RCVLOWAT from the window
    read_batch: int = 1  # SO_RCVLOWAT as set (1: the kernel's default)
    _memory_window: int | None = None  # the window the live receive buffer was last sized for

    def apply(self, decision: Decision, *, before_handshake: bool = False, offered: int | None = None) -> None:
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
        if decision.rcv_window is not None and self.kernel_owns == "rcvbuf":
            if not before_handshake:
                self._tcp_opt(TCP_WINDOW_CLAMP, decision.rcv_window)
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
            within = self._set(socket.SO_RCVBUF, SO_RCVBUFFORCE, value, "rmem_max")
            if not before_handshake:
                # Without this the live window stays where it was
                # (docs/DESIGN.md#kf-rcvbuf-alone).  At rmem_max the buffer
                # binds: a clamp at W would cut the window the buffer gives
                # (docs/DESIGN.md#socket-actuation).
                rmem_max = self.limits.rmem_max if self.limits else None
                at_cap = not within and rmem_max and window * RCVBUF_PER_WINDOW >= rmem_max
                self._tcp_opt(TCP_WINDOW_CLAMP, 2 * rmem_max if at_cap and rmem_max else window)
        if decision.rcv_window is not None and not before_handshake:
            self.set_read_batch(decision.rcv_window)  # after the clamp
        if decision.sndbuf is not None and self.kernel_owns != "sndbuf":
            self._set(socket.SO_SNDBUF, SO_SNDBUFFORCE, decision.sndbuf, "wmem_max")
        if decision.notsent is not None:  # the unsent data behind the flight, on any host
            self._tcp_opt(TCP_NOTSENT_LOWAT, max(int(decision.notsent), NOTSENT_MIN))
        self.read_back()

    def held_memory(self) -> int:
        """Kernel memory of a receive buffer held above the decision for a
        window already offered (:meth:`apply`), as `ss` shows it; 0 if none."""
        if not self.holding or not self._memory_window:
            return 0
        return int(self._memory_window * RCVBUF_PER_WINDOW * 2)

    def set_read_batch(self, window: int) -> None:
        """SO_RCVLOWAT from the receive window (READ_BATCH_*): fewer, larger
        reads (docs/DESIGN.md#rcvlowat).  Set after the clamp: raising it
        grows an unlocked buffer and lifts a window_clamp below it to it
        (docs/DESIGN.md#kf-rcvlowat); at 1/8 of the window it never
        reaches the clamp just set."""
        value = min(window // READ_BATCH_SHARE, READ_BATCH_MAX)
        value = value if value >= READ_BATCH_MIN else 1
        if value == self.read_batch or not self.batch_reads or not LINUX:
            return
        try:
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVLOWAT, value)
            self.read_batch = value
        except OSError as exc:
            log.debug("setsockopt(SO_RCVLOWAT, %d) failed: %s", value, exc)

    def _tcp_opt(self, opt: int, value: int) -> None:
        """A Linux TCP-level option (window clamp, unsent low-water mark)."""
        if not LINUX:
            return
        try:
            self.sock.setsockopt(socket.IPPROTO_TCP, opt, int(value))
        except OSError as exc:
            log.debug("setsockopt(IPPROTO_TCP, %d, %d) failed: %s", opt, value, exc)

    def _set(self, opt: int, force_opt: int, value: int, limit_name: str) -> bool:
        """Set a buffer; False when the host's limit cut (or meets) the value."""
        value = max(int(value), 4096)
        if self.allow_force and LINUX:
            try:
                self.sock.setsockopt(socket.SOL_SOCKET, force_opt, value)
                return True
            except OSError:
                self.allow_force = False  # no CAP_NET_ADMIN: fall back for good
        limit = getattr(self.limits, limit_name, None) if self.limits else None
        if limit and value > limit and limit_name not in self.capped:
            self.capped.append(limit_name)  # reported once by the driver
        try:
            self.sock.setsockopt(socket.SOL_SOCKET, opt, value)
        except OSError as exc:
            log.debug("setsockopt(%s, %d) failed: %s", opt, value, exc)
        return not (limit and value >= limit)

    def read_back(self) -> tuple[int, int]:
        try:
            r = self.sock.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF)
            s = self.sock.getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF)
        except OSError:
            return 0, 0
        self.peak_rcvbuf = max(self.peak_rcvbuf, r)
        self.peak_sndbuf = max(self.peak_sndbuf, s)
        return r, s


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


def block_with_send_timeout(sock: socket.socket, seconds: float) -> None:
    """Make ``sock`` blocking, with SO_SNDTIMEO so that a blocked send or
    sendfile returns (a partial count, or EAGAIN when nothing went) at least
    every ``seconds``: a thread sending on it can then look for a stop."""
    sock.setblocking(True)  # clears O_NONBLOCK (settimeout would set it)
    sec = int(seconds)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO,
                    struct.pack("ll", sec, int((seconds - sec) * 1e6)))
