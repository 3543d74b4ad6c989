"""Binds a tuning strategy to one data socket; shared by server and client.

The strategy decides (sans-IO); this object observes the socket through
:mod:`drsftp.sockopt`, applies the decisions, keeps a bounded timeline for
reports, and converts to and from DRS command pairs.  The event loop that
calls :meth:`tick` belongs to the driver (pyftpdlib's ioloop or asyncio).
"""

from __future__ import annotations

import logging
import socket
import time
from dataclasses import dataclass, field, replace

from . import sockopt
from .ftp import drscmd
from .tuning import NO_CHANGE, Decision, DRSTuning, Role, Tuning, create
from .tuning.budget import BufferBudget

log = logging.getLogger("drsftp.tuner")
TIMELINE_LIMIT = 20_000  # samples kept for --json / plots (bounded memory)
DRAIN_MIN_RATE = 64 * 1024  # bytes/s assumed for a closed socket's queue when the last rate was lower
DRAIN_MAX = 60.0  # seconds a closed socket's queue stays held in the budget, at most


@dataclass
class TunerStats:
    rtt_min: float | None = None
    rtt_max: float | None = None
    rtt_sum: float = 0.0
    rtt_n: int = 0
    retransmits: int = 0
    timeline: list[dict] = field(default_factory=list)

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
    ) -> None:
        self.role = role
        self.parallel = parallel  # one of N streams (docs/DESIGN.md#parallel-streams)
        self.limits = limits or sockopt.HostLimits.read()
        self.allow_force = allow_force and self.limits.can_force
        self.tuning: Tuning = create(spec, role)
        self.budget = budget
        # SO_RCVLOWAT (sockopt.READ_BATCH_*); off where the peer may wait for
        # a reply smaller than the batch, as TLS's close_notify
        self.batch_reads = batch_reads
        self.kernel_owns: str | None = None  # "rcvbuf"/"sndbuf": memory left to kernel autotuning
        self.size_cap: int | None = None  # a ceiling set by the peer (GridFTP's SBUF)
        self._cap_to_host()
        self.clock = clock
        self.sock: socket.socket | None = None
        self.actuator: sockopt.BufferActuator | None = None
        self.stats = TunerStats()
        self.started = clock()
        self.last_info: dict[str, int] = {}
        self.last_rtt: float | None = None
        self.control_rtt: float | None = None  # measured over the control channel
        self._warned_cap = False
        self._last_rate_sample: tuple[float, int] | None = None
        self.rate = 0.0  # bytes/s over the last tick
        self._wanted: Decision | None = None  # the strategy's last decision
        self._applied: Decision | None = None  # what the budget let through
        self.handshake_window: int | None = None  # set before the handshake

    def _cap_to_host(self) -> None:
        """Choose who sizes the data direction's buffer, and cap DRS to what
        that actuation can obtain.  Where kernel autotuning reaches further
        than setsockopt (:func:`sockopt.autotuning_reaches_further`), no
        buffer of the data direction is set, since setting one stops
        autotuning for good: a receiver keeps DRS's window by
        TCP_WINDOW_CLAMP alone and lets the kernel size the memory behind
        it; a sender leaves the buffer to the kernel and bounds what the
        application queues past the flight with TCP_NOTSENT_LOWAT instead
        (DRS's send-buffer decision as the unsent allowance).  Under a
        budget (a server's) only while the budget can hold the most
        autotuning may grow to (claimed in :meth:`attach`).  Never for one
        of N parallel streams: N sockets multiply what setsockopt can set,
        and DRS's open start ramps each one faster than autotuning's
        (docs/DESIGN.md#parallel-streams)."""
        if not isinstance(self.tuning, DRSTuning):
            return
        self._config0 = self.tuning.config
        self._leave_to_kernel(
            not self.parallel
            and sockopt.autotuning_reaches_further(self.limits, self.allow_force, self.role is Role.RECEIVER)
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
            host = sockopt.host_cap(self.limits, self.allow_force, receiving)
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

    # -- socket lifecycle --------------------------------------------------
    def before_handshake(self, sock: socket.socket, *, reserve_as: object = None) -> None:
        """Call on the socket before connect()/listen(): fixes the window scale.
        With a budget, a handshake buffer is first reserved in it under
        ``reserve_as`` (released by :meth:`after_handshake`); when the budget
        cannot spare the floor, nothing is set (the kernel default)."""
        if self.kernel_owns == "rcvbuf":
            return  # no open start: a buffer set now would stop autotuning
        decision = self.tuning.before_handshake(rtt=self.control_rtt)
        if self.budget is not None and reserve_as is not None and decision.rcv_window:
            # set before the handshake, a value V is held as 2 V (no 0.8 factor)
            granted = self.budget.reserve(reserve_as, 2 * decision.rcv_window) // 2
            floor = getattr(getattr(self.tuning, "config", None), "floor", 0)
            if granted < max(floor, 1):
                self.budget.release(reserve_as)
                return
            decision = replace(decision, rcv_window=granted)
        if not decision.is_empty():
            self._actuator(sock).apply(decision, before_handshake=True)
            self.handshake_window = decision.rcv_window

    def after_handshake(self, sock: socket.socket, *, reserved_as: object = None) -> None:
        """Call once connected (or accepted), before any data flows."""
        decision = self.tuning.after_handshake(rtt=self.control_rtt)
        if not decision.is_empty():
            self._actuator(sock).apply(decision)
            self._wanted = self._applied = decision
        if self.budget is not None and reserved_as is not None:
            self.budget.release(reserved_as)

    @property
    def static_window(self) -> int | None:
        """The window set before the handshake when no decision followed it
        (a fixed buffer): the read batch is sized from it at attach."""
        return self.handshake_window if self._applied is None else None

    def _actuator(self, sock: socket.socket) -> sockopt.BufferActuator:
        return sockopt.BufferActuator(sock, self.allow_force, self.limits, kernel_owns=self.kernel_owns,
                                      batch_reads=self.batch_reads)

    def note_control_rtt(self, control_sock) -> None:
        """Take the control connection's smoothed RTT (same path) as a
        reference for the data connection's first, unreliable samples."""
        us = sockopt.tcp_info(control_sock).get("rtt") if control_sock is not None else None
        if us:
            rtt = us / 1e6
            self.control_rtt = rtt if self.control_rtt is None else min(self.control_rtt, rtt)

    def attach(self, sock: socket.socket) -> None:
        """The data connection is established; start observing it."""
        self.sock = sock
        if self.kernel_owns and self.budget is not None and not self.budget.claim(self, self._autotuning_max()):
            self._leave_to_kernel(False)  # the budget filled since: set buffers, within a share
        if self.kernel_owns:
            log.info("kernel autotuning may grow the %s past what setsockopt can set here (no FORCE): %s",
                     *_KERNEL_OWNS_NOTE[self.kernel_owns])
        self.actuator = self._actuator(sock)
        if self.role is Role.RECEIVER and self.static_window:
            self.actuator.set_read_batch(self.static_window)  # no later decision will
        self.actuator.read_back()
        self.started = self.clock()

    # -- periodic work -----------------------------------------------------
    def tick(self, moved_bytes: int = 0) -> float | None:
        """Observe, decide, apply.  Returns seconds until the next tick."""
        if self.sock is None or self.actuator is None:
            return None
        now = self.clock()
        info = sockopt.tcp_info(self.sock)
        receiving = self.role is Role.RECEIVER
        sample = sockopt.sample_from_info(info, moved_bytes)  # moved_bytes where TCP_INFO lacks them
        rtt = sockopt.rtt_from_info(info, receiving)
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
            # re-checked every tick: a share shrinks when other flows arrive
            # the budget counts kernel memory, as `ss` shows it
            granted = self.budget.limit(self, sockopt.kernel_memory(self._wanted),
                                        pinned=self.actuator.held_memory())
            # (the unsent allowance costs no memory of its own: the send buffer bounds it)
            decision = replace(sockopt.from_kernel_memory(granted), notsent=self._wanted.notsent)
        applied = self._applied or NO_CHANGE
        # only what changed: a sender's decisions carry its constant ACK-side
        # buffer, and each setsockopt is a syscall per tick
        decision = decision.changes_from(applied)
        if decision.rcv_window is None and applied.rcv_window is not None and (
                self.actuator.holding or self.kernel_owns == "rcvbuf"):
            # the receive side again, unchanged: its buffer follows the offered
            # window down, or autotuning, growing the buffer, raised
            # window_clamp with it (tcp_rcv_space_adjust)
            decision = replace(decision, rcv_window=applied.rcv_window)
        if not decision.is_empty():
            self._applied = decision.over(applied)
            self.actuator.apply(decision, offered=info.get("rcv_wnd"))
            if self.actuator.capped and not self._warned_cap:
                self._warned_cap = True
                log.warning(
                    "buffer capped by net.core.%s; allow --force-buffers (CAP_NET_ADMIN)"
                    " or raise the sysctl for a larger window",
                    " and ".join(self.actuator.capped),
                )
        self._record(now, sample, moved_bytes)
        return self.tuning.tick_interval(rtt=rtt) or 0.25

    def _record(self, now: float, sample: sockopt.Sample, moved: int) -> None:
        moved = max(moved, sample.bytes_received if self.role is Role.RECEIVER else sample.bytes_acked)
        if self._last_rate_sample:
            t0, b0 = self._last_rate_sample
            if now - t0 >= 0.05:
                self.rate = (moved - b0) / (now - t0)
                self._last_rate_sample = (now, moved)
        else:
            self._last_rate_sample = (now, moved)
        if len(self.stats.timeline) >= TIMELINE_LIMIT:
            return
        rcvbuf, sndbuf = self.actuator.read_back() if self.actuator else (0, 0)
        info = self.last_info
        mss = info.get("snd_mss") or 0
        self.stats.timeline.append({
            "t": round(now - self.started, 4),
            "bytes": moved,
            "rate_bps": round(self.rate * 8),
            "rtt_ms": round(self.last_rtt * 1000, 3) if self.last_rtt else None,
            "window": getattr(self.tuning, "window", None),
            "rcvbuf": rcvbuf,
            "sndbuf": sndbuf,
            "cwnd": info.get("snd_cwnd", 0) * mss if mss else None,
            "in_flight": info.get("unacked", 0) * mss if mss else None,
            "peer_window": info.get("snd_wnd"),
        })

    # -- DRS command payloads ----------------------------------------------
    def report_pairs(self) -> str:
        """Our measurements as DRS ``key=value`` pairs, read afresh."""
        if self.sock is not None:
            self.last_info = sockopt.tcp_info(self.sock) or self.last_info
        info = self.last_info
        mss = info.get("snd_mss") or 0
        rtt_us = info.get("rtt") if self.role is Role.SENDER else None
        if not rtt_us and self.last_rtt:
            rtt_us = int(self.last_rtt * 1e6)
        rcvbuf, sndbuf = self.actuator.read_back() if self.actuator else (None, None)
        window = None
        if self.role is Role.RECEIVER:
            # The window offered from now on: the decision, or more where the
            # buffer binds at rmem_max (the kernel's rcv_ssthresh then).
            window = max(getattr(self.tuning, "window", 0) or 0, info.get("rcv_ssthresh", 0)) or None
        return drscmd.format_pairs({
            "rtt_us": rtt_us,
            "cwnd": info.get("snd_cwnd", 0) * mss if self.role is Role.SENDER and mss else None,
            "inflight": info.get("unacked", 0) * mss if self.role is Role.SENDER and mss else None,
            "wnd": window or (rcvbuf if self.role is Role.RECEIVER else None),
            "rate": self.rate,
            "bytes": info.get("bytes_acked") if self.role is Role.SENDER else info.get("bytes_received"),
            "rcvbuf": rcvbuf,
            "sndbuf": sndbuf,
            "retrans": info.get("total_retrans"),
        })

    def on_peer_pairs(self, pairs: dict[str, int]) -> None:
        report = drscmd.to_report(pairs)
        self.tuning.on_peer_report(report, now=self.clock(), rtt=self.last_rtt)

    def close(self) -> float | None:
        """The transfer ended: give its share of the budget back.  Call it
        before the socket is closed.  Data still queued on a sender's
        socket is the kernel's to send after close() and keeps its memory
        until acknowledged: that much stays held in the budget (counted as
        a send buffer of that size, 2x), and the seconds it should take to
        drain are returned for the driver to call :meth:`release` then."""
        drain = None
        if self.budget is not None:
            queued = self._queued() if self.role is Role.SENDER else 0
            if queued:
                self.budget.hold(self, 2 * queued)
                rtt = self.last_rtt or self.control_rtt or 0.1
                drain = min(queued / max(self.rate, DRAIN_MIN_RATE) + 2 * rtt, DRAIN_MAX)
            else:
                self.budget.release(self)
        self.sock = None
        return drain

    def release(self) -> None:
        """What :meth:`close` kept held has drained: give it back."""
        if self.budget is not None:
            self.budget.release(self)

    def _queued(self) -> int:
        """Bytes the kernel still holds to send: unsent plus in flight."""
        info = sockopt.tcp_info(self.sock) if self.sock is not None else {}
        return info.get("notsent_bytes", 0) + info.get("unacked", 0) * (info.get("snd_mss") or 0)

    def summary(self) -> dict:
        act = self.actuator
        return {
            "tuning": self.tuning.describe(),
            "rtt_min_ms": _ms(self.stats.rtt_min),
            "rtt_avg_ms": _ms(self.stats.rtt_avg),
            "rtt_max_ms": _ms(self.stats.rtt_max),
            "retransmits": self.stats.retransmits,
            "peak_rcvbuf": act.peak_rcvbuf if act else None,
            "peak_sndbuf": act.peak_sndbuf if act else None,
            "handshake_window": self.handshake_window,  # set before the handshake: DRS open start, fixed; None: none
            "kernel_owns": self.kernel_owns,  # a buffer left to autotuning (host limits)
        }


_KERNEL_OWNS_NOTE = {
    "rcvbuf": ("receive buffer", "net.ipv4.tcp_rmem max > 2 x net.core.rmem_max; clamping the window only"),
    "sndbuf": ("send buffer", "net.ipv4.tcp_wmem max > 2 x net.core.wmem_max; bounding unsent data"
               " with TCP_NOTSENT_LOWAT"),
}


def _ms(v: float | None) -> float | None:
    return round(v * 1000, 3) if v is not None else None
