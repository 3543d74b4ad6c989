"""Socket actuation: the one place that calls setsockopt and reads TCP_INFO.

It applies what the sans-IO controller decided (:class:`SocketActions`:
drsftp/tuning/controller.py, docs/DESIGN.md#socket-controller).  Linux facts
the two respect (docs/DESIGN.md#kernel-facts):
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

import ipaddress
import logging
import socket
import struct
import sys

from ..tuning.actuation import HostLimits, SocketActions
from ..tuning.base import MAX_BUFFER

log = logging.getLogger("drsftp.io.sockopt")

LINUX = sys.platform.startswith("linux")
SO_RCVBUFFORCE = 33
SO_SNDBUFFORCE = 32
TCP_INFO = getattr(socket, "TCP_INFO", 11)
TCP_WINDOW_CLAMP = getattr(socket, "TCP_WINDOW_CLAMP", 10)
TCP_NOTSENT_LOWAT = getattr(socket, "TCP_NOTSENT_LOWAT", 25)
SO_BUF_LOCK = getattr(socket, "SO_BUF_LOCK", 72)  # Linux 5.14+: the buffer locks, read and cleared
SOCK_SNDBUF_LOCK, SOCK_RCVBUF_LOCK = 1, 2  # include/net/sock.h


def _read_sysctl(name: str) -> list[int] | None:
    try:
        with open("/proc/sys/" + name.replace(".", "/")) as f:
            return [int(x) for x in f.read().split()]
    except (OSError, ValueError):
        return None


def read_host_limits() -> HostLimits:
    """This host's buffer caps and autotuning ranges (docs/DESIGN.md, kf-caps)."""
    r, w = _read_sysctl("net.core.rmem_max"), _read_sysctl("net.core.wmem_max")
    tr, tw = _read_sysctl("net.ipv4.tcp_rmem"), _read_sysctl("net.ipv4.tcp_wmem")
    try:
        with open("/proc/sys/net/ipv4/tcp_congestion_control") as f:
            cc = f.read().strip()
    except OSError:
        cc = None
    return HostLimits(
        r[0] if r else None,
        w[0] if w else None,
        tuple(tr) if tr else None,
        tuple(tw) if tw else None,
        cc,
        _probe_force(),
    )


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


def set_nodelay(sock: socket.socket) -> None:
    """TCP_NODELAY, which also sends what Nagle's rule holds now: a sub-MSS
    segment waits for the ACK of a small one in flight (RFC 896; RFC 1122
    sec. 4.2.3.4), up to an RTT for a MODE E stream's EOD after its last
    block's tail (docs/DESIGN.md#eod-nodelay)."""
    try:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    except OSError as exc:
        log.debug("setsockopt(TCP_NODELAY) failed: %s", exc)


def set_rcvlowat(sock: socket.socket, value: int) -> None:
    """SO_RCVLOWAT alone (a MODE E receiver's mark follows its blocks:
    docs/DESIGN.md#rcvlowat)."""
    if LINUX:
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVLOWAT, value)
        except OSError as exc:
            log.debug("setsockopt(SO_RCVLOWAT, %d) failed: %s", value, exc)


def apply_actions(sock: socket.socket, actions: SocketActions) -> bool:
    """Set what ``actions`` says, in its order (the clamp after the buffer,
    the read batch after the clamp: docs/DESIGN.md#kf-rcvlowat).  Returns
    False when a FORCE variant was refused (no CAP_NET_ADMIN): the plain
    option was set instead, and so for the rest of this call."""
    force = actions.force and LINUX
    if actions.rcvbuf is not None:
        force = _set_buffer(sock, socket.SO_RCVBUF, SO_RCVBUFFORCE, actions.rcvbuf, force)
    if actions.clamp is not None:
        _tcp_opt(sock, TCP_WINDOW_CLAMP, actions.clamp)
    if actions.rcvlowat is not None and LINUX:
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVLOWAT, actions.rcvlowat)
        except OSError as exc:
            log.debug("setsockopt(SO_RCVLOWAT, %d) failed: %s", actions.rcvlowat, exc)
    if actions.sndbuf is not None:
        force = _set_buffer(sock, socket.SO_SNDBUF, SO_SNDBUFFORCE, actions.sndbuf, force)
    if actions.notsent_lowat is not None:
        _tcp_opt(sock, TCP_NOTSENT_LOWAT, actions.notsent_lowat)
    return force or not (actions.force and LINUX)


def _tcp_opt(sock: socket.socket, opt: int, value: int) -> None:
    """A Linux TCP-level option (window clamp, unsent low-water mark)."""
    if not LINUX:
        return
    try:
        sock.setsockopt(socket.IPPROTO_TCP, opt, int(value))
    except OSError as exc:
        log.debug("setsockopt(IPPROTO_TCP, %d, %d) failed: %s", opt, value, exc)


def _set_buffer(sock: socket.socket, opt: int, force_opt: int, value: int, force: bool) -> bool:
    """Set a buffer, by FORCE when ``force``; returns whether FORCE still goes.
    The value is an int the kernel doubles (#kf-doubling): at most 1 GiB."""
    value = min(value, MAX_BUFFER)
    if force:
        try:
            sock.setsockopt(socket.SOL_SOCKET, force_opt, value)
            return True
        except OSError:
            pass  # no CAP_NET_ADMIN: the plain option, capped by the host
    try:
        sock.setsockopt(socket.SOL_SOCKET, opt, value)
    except OSError as exc:
        log.debug("setsockopt(%s, %d) failed: %s", opt, value, exc)
    return False


def unlock_buffer(sock: socket.socket, receive: bool) -> bool:
    """Give a buffer set earlier on this socket back to kernel autotuning:
    setting SO_RCVBUF/SO_SNDBUF locks it (socket(7)), and only SO_BUF_LOCK
    (Linux 5.14+) clears the lock.  False where it cannot (or it was not set)."""
    bit = SOCK_RCVBUF_LOCK if receive else SOCK_SNDBUF_LOCK
    if not LINUX:
        return False
    try:
        locks = sock.getsockopt(socket.SOL_SOCKET, SO_BUF_LOCK)
        if not locks & bit:
            return False
        sock.setsockopt(socket.SOL_SOCKET, SO_BUF_LOCK, locks & ~bit)
        return True
    except OSError as exc:
        log.debug("SO_BUF_LOCK failed: %s", exc)
        return False


def read_buffers(sock: socket.socket) -> tuple[int, int]:
    """SO_RCVBUF and SO_SNDBUF as the kernel holds them (doubled: #kf-doubling);
    (0, 0) on a closed socket."""
    try:
        return (sock.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF),
                sock.getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF))
    except OSError:
        return 0, 0


def block_with_send_timeout(sock: socket.socket, seconds: float) -> None:
    """Make ``sock`` blocking, with SO_SNDTIMEO so that a blocked send or
    sendfile returns (a partial count, or EAGAIN when nothing went) at least
    every ``seconds``: a thread sending on it can then look for a stop."""
    sock.setblocking(True)  # clears O_NONBLOCK (settimeout would set it)
    sec = int(seconds)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO,
                    struct.pack("ll", sec, int((seconds - sec) * 1e6)))


def peek_byte(sock: socket.socket) -> bytes | None:
    """The next byte the peer sent, left queued (MSG_PEEK): b"" once it
    closed (or the connection failed), None while nothing has come."""
    try:
        return sock.recv(1, socket.MSG_PEEK)
    except (BlockingIOError, InterruptedError):
        return None
    except OSError:
        return b""


def peer_on_this_host(sock: socket.socket) -> bool:
    """Whether ``sock``'s peer is this host: a loopback address, or the
    socket's own address (a local route makes the destination the source).
    A peer in another network namespace is another host here."""
    try:
        local, peer = sock.getsockname()[0], sock.getpeername()[0]
    except (OSError, IndexError, TypeError):
        return False
    return same_host(local, peer)


def same_host(local: str, peer: str) -> bool:
    try:
        ip = ipaddress.ip_address(peer.split("%", 1)[0])
    except ValueError:
        return False
    mapped = getattr(ip, "ipv4_mapped", None)
    return bool((mapped or ip).is_loopback or peer == local)
