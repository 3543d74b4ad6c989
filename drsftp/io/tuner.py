"""Drives one data socket's controller; shared by server and client.

The controller decides (sans-IO: drsftp/tuning/controller.py,
docs/DESIGN.md#socket-controller); this object reads TCP_INFO through
:mod:`drsftp.io.sockopt`, hands it to the controller with the time and the bytes
moved, applies the actions it returns, and converts to and from DRS command
pairs.  The event loop that calls :meth:`tick` belongs to the driver
(pyftpdlib's ioloop or asyncio).
"""

from __future__ import annotations

import logging
import socket
import time

from ..ftp import drscmd
from ..tuning import Role
from ..tuning.actuation import SocketActions, queued_bytes
from ..tuning.budget import BufferBudget
from ..tuning.controller import DRAIN_MAX, SocketController
from ..tuning.count import sharing
from . import sockopt

__all__ = ["DRAIN_MAX", "SocketTuner"]

log = logging.getLogger("drsftp.io.tuner")


class SocketTuner:
    def __init__(
        self,
        spec: str,
        role: Role,
        *,
        allow_force: bool = False,
        limits: sockopt.HostLimits | None = None,
        clock=time.monotonic,
        budget: BufferBudget | None = None,
        batch_reads: bool = True,
        parallel: bool = False,
        timeline: bool = True,
    ) -> None:
        self.ctl = SocketController(spec, role, limits=limits or sockopt.read_host_limits(), allow_force=allow_force,
                                    budget=budget, budget_key=self, batch_reads=batch_reads, parallel=parallel)
        self.clock = clock
        # False: no timeline kept (a cached session's streams: no file record carries
        # one, and its 20,000 samples a stream would grow with the job's length)
        self.timeline = timeline
        self.sock: socket.socket | None = None
        self._attached: socket.socket | None = None  # the data socket, also after close (reports)
        self.peak_rcvbuf = self.peak_sndbuf = 0
        self.ctl.started = clock()

    # what the drivers and reports read (and set: the control RTT where
    # TCP_INFO is missing, a fixed buffer's handshake window)
    role = property(lambda self: self.ctl.role)
    tuning = property(lambda self: self.ctl.tuning)
    allow_force = property(lambda self: self.ctl.allow_force)
    kernel_owns = property(lambda self: self.ctl.kernel_owns)
    static_window = property(lambda self: self.ctl.static_window)
    stats = property(lambda self: self.ctl.stats)
    rate = property(lambda self: self.ctl.rate)
    last_rtt = property(lambda self: self.ctl.last_rtt)
    last_info = property(lambda self: self.ctl.last_info)
    control_rtt = property(lambda self: self.ctl.control_rtt,
                           lambda self, v: setattr(self.ctl, "control_rtt", v))
    handshake_window = property(lambda self: self.ctl.handshake_window,
                                lambda self, v: setattr(self.ctl, "handshake_window", v))

    def cap_size(self, size: int | None) -> None:
        """Cap DRS's buffer decisions at ``size`` bytes (SBUF, GFD.20; -P
        auto's window per stream); None: the host's cap alone."""
        self.ctl.cap_size(size)

    @property
    def read_batch(self) -> int:
        """SO_RCVLOWAT for the window in force (READ_BATCH_*)."""
        return self.ctl.read_batch

    def set_low_water(self, sock: socket.socket, value: int) -> None:
        """SO_RCVLOWAT set by the driver (batch_reads=False tuners)."""
        sockopt.set_rcvlowat(sock, value)

    def _apply(self, sock: socket.socket, actions: SocketActions) -> None:
        if not actions.is_empty():
            if not sockopt.apply_actions(sock, actions):
                self.ctl.force_refused()
            self._read_back(sock)

    def _read_back(self, sock: socket.socket) -> tuple[int, int]:
        rcv, snd = sockopt.read_buffers(sock)
        self.peak_rcvbuf = max(self.peak_rcvbuf, rcv)
        self.peak_sndbuf = max(self.peak_sndbuf, snd)
        return rcv, snd

    # -- socket lifecycle --------------------------------------------------
    def before_handshake(self, sock: socket.socket, *, reserve_as: object = None) -> None:
        """Call on the socket before connect()/listen(): fixes the window scale
        (a budget's reservation under ``reserve_as``: SocketController)."""
        self._apply(sock, self.ctl.before_handshake(reserve_as=reserve_as))

    def after_handshake(self, sock: socket.socket, *, reserved_as: object = None) -> None:
        """Call once connected (or accepted), before any data flows."""
        self._apply(sock, self.ctl.after_handshake(reserved_as=reserved_as))

    def note_control_rtt(self, control_sock) -> None:
        """Take the control connection's smoothed RTT (same path) as a
        reference for the data connection's first, unreliable samples."""
        if control_sock is not None:
            self.ctl.note_control_rtt(sockopt.tcp_info(control_sock).get("rtt"))

    def note_foreign_path(self) -> None:
        """The data peer is not the control connection's (third-party): its
        RTT is not the data path's (SocketController.note_foreign_path)."""
        self.ctl.note_foreign_path()

    def attach(self, sock: socket.socket) -> None:
        """The data connection is established; start observing it."""
        self.sock = self._attached = sock
        self.peak_rcvbuf = self.peak_sndbuf = 0  # the data connection's, not the handshake's
        # (under a budget the first decision is made now: from TCP_INFO)
        info = sockopt.tcp_info(sock) if self.ctl.budget is not None else None
        actions = self.ctl.attach(now=self.clock(), info=info)
        if self.ctl.kernel_owns:
            # a socket tuned before for the other direction (a kept-alive HTTP
            # connection) has this buffer locked: autotuning resumes only unlocked
            sockopt.unlock_buffer(sock, receive=self.ctl.kernel_owns == "rcvbuf")
            log.info("kernel autotuning may grow the %s past what setsockopt can set here (no FORCE): %s",
                     *_KERNEL_OWNS_NOTE[self.ctl.kernel_owns])
        if not actions.is_empty() and not sockopt.apply_actions(sock, actions):
            self.ctl.force_refused()
        self._read_back(sock)

    # -- periodic work -----------------------------------------------------
    def tick(self, moved_bytes: int = 0) -> float | None:
        """Observe, decide, apply.  Returns seconds until the next tick."""
        if self.sock is None or self.ctl.plan is None:
            return None
        now = self.clock()
        actions = self.ctl.tick(sockopt.tcp_info(self.sock), moved_bytes, now=now)
        self._apply(self.sock, actions)
        if actions.capped:
            log.warning("buffer capped by net.core.%s; allow --force-buffers (CAP_NET_ADMIN)"
                        " or raise the sysctl for a larger window", " and ".join(actions.capped))
        if not self.timeline:
            self._read_back(self.sock)  # (the buffers' peaks, still reported)
        elif not self.ctl.timeline_full:
            self.ctl.record(now, *self._read_back(self.sock))
        return actions.next_tick

    # -- DRS command payloads ----------------------------------------------
    def report(self) -> dict[str, int]:
        """Our measurements as DRS pairs (key -> int), read afresh: what the
        transfer core (drsftp.ftp.drsexchange) sums and sends."""
        info = self._info()
        buffers = self._read_back(self._attached) if self._attached is not None else None
        pairs = {k: int(v) for k, v in self.ctl.report(info, buffers).items() if v is not None and v >= 0}
        if self.role is Role.SENDER:
            # how long the socket was busy, and limited by a buffer cap: what
            # a receiving client's -P auto shares the path by (tuning/count/sharing.py)
            pairs.update(sharing.limit_pairs(info or self.ctl.last_info))
        return pairs

    def report_pairs(self) -> str:
        """:meth:`report` as the DRS command's text."""
        return drscmd.format_pairs(dict(self.report()))

    def expect(self, more: int, moved_bytes: int = 0) -> None:
        """``more`` bytes were just asked of the peer (an HTTP request sent):
        a receiver opens its window for them now, before they come
        (docs/DESIGN.md#drs-demand)."""
        if self.sock is None or self.ctl.plan is None or self.role is not Role.RECEIVER:
            return
        info = sockopt.tcp_info(self.sock)
        self.ctl.expect(info, more)
        self._apply(self.sock, self.ctl.tick(info, moved_bytes, now=self.clock()))

    def on_peer_pairs(self, pairs: dict[str, int]) -> None:
        self.ctl.on_peer_report(drscmd.to_report(pairs), now=self.clock())

    def close(self) -> float | None:
        """The transfer ended: give its share of the budget back.  Call it
        before the socket is closed.  Returns the seconds a sender's queued
        data should take to drain (SocketController.close): call
        :meth:`release` then."""
        drain = self.ctl.close(self._info())
        self.sock = None
        return drain

    def release(self) -> None:
        """What :meth:`close` kept held has drained: give it back."""
        self.ctl.release()

    def _info(self) -> dict[str, int]:
        return sockopt.tcp_info(self.sock) if self.sock is not None else {}

    def _queued(self) -> int:
        """Bytes the kernel still holds to send: unsent plus in flight."""
        return queued_bytes(self._info())

    def summary(self) -> dict:
        ctl, attached = self.ctl, self.ctl.plan is not None
        return {
            "tuning": ctl.tuning.describe(),
            "rtt_min_ms": _ms(ctl.stats.rtt_min),
            "rtt_avg_ms": _ms(ctl.stats.rtt_avg),
            "rtt_max_ms": _ms(ctl.stats.rtt_max),
            "retransmits": ctl.stats.retransmits,
            "peak_rcvbuf": self.peak_rcvbuf if attached else None,
            "peak_sndbuf": self.peak_sndbuf if attached else None,
            "handshake_window": ctl.handshake_window,  # set before the handshake: DRS open start, fixed; None: none
            "kernel_owns": ctl.kernel_owns,  # a buffer left to autotuning (host limits)
        }


_KERNEL_OWNS_NOTE = {
    "rcvbuf": ("receive buffer", "net.ipv4.tcp_rmem max > 2 x net.core.rmem_max; clamping the window only"),
    "sndbuf": ("send buffer", "net.ipv4.tcp_wmem max > 2 x net.core.wmem_max; bounding unsent data"
               " with TCP_NOTSENT_LOWAT"),
}


def _ms(v: float | None) -> float | None:
    return round(v * 1000, 3) if v is not None else None
