"""Parallel download from a stream-mode server: N sessions on REST ranges.

For servers without extended block mode (no PARALLEL in FEAT: vsftpd,
stock pyftpdlib).  Each session fetches one range at a time: ``REST
start``, ``RETR``, reads exactly up to its range's end (written with
pwrite at the offset), then closes the data connection and accepts the
server's 226, 426 or 451, as lftp's pget does; a server that answers
nothing is sent ABOR, and a session that still does not settle is replaced.
Ranges come from :class:`~.rangeplan.RangePlan` (work stealing); under
``-P auto`` the :class:`~drsftp.tuning.count.streams.StreamController` opens and
ends sessions.  Each data connection has its own SocketTuner (DRS per
stream; with a drsftp server each session exchanges DRS on its own).

Over TLS (``--tls``, ``ftps://``) every session is secured as a single
get's (AUTH TLS, PBSZ 0, PROT P) and each data connection resumes its own
control connection's TLS session (RFC 4217 sec. 10).  A range ended early
is aborted without close_notify, as a plain one is without the rest of
its bytes: the server's 426 or 451 is accepted either way.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import replace

from ...ftp.flow import FlowError, State
from ...io.fileio import pwrite_all
from ...io.tuner import SocketTuner
from ...tuning import Role
from ...tuning.count import sharing
from ...tuning.count.streams import StreamSample
from ..session.control import ControlConnection, FTPError
from ..session.flowctl import FlowControl
from ..session.login import open_logged_in
from ..transfer.dataconn import settle, start_data
from ..transfer.options import TransferOptions
from ..transfer.streammode import StreamTransfer, drive_data
from .rangeplan import Assignment, RangePlan, read_chunk

log = logging.getLogger("drsftp.client")
SETTLE_TIMEOUT = 10.0  # seconds for the RETR's final reply after the data connection closed


class StreamStats:
    """One worker's figures, for the JSON."""

    def __init__(self, worker: int) -> None:
        self.worker = worker
        self.bytes = 0
        self.ranges = 0
        self.started = time.monotonic()
        self.ended: float | None = None
        self.tuner: SocketTuner | None = None
        self.summaries: list[dict] = []
        self.drs_replies = 0

    def as_dict(self) -> dict:
        last = self.summaries[-1] if self.summaries else {}
        secs = (self.ended or time.monotonic()) - self.started
        return {"stream": self.worker, "bytes": self.bytes, "ranges": self.ranges,
                "seconds": round(secs, 4), "mbps": round(self.bytes * 8 / secs / 1e6, 3) if secs > 0 else 0.0,
                "rtt_min_ms": last.get("rtt_min_ms"), "rtt_avg_ms": last.get("rtt_avg_ms"),
                "retransmits": sum(s.get("retransmits") or 0 for s in self.summaries),
                "peak_rcvbuf": max((s.get("peak_rcvbuf") or 0 for s in self.summaries), default=0)}


class _RangeSink(asyncio.BufferedProtocol):
    """Reads one range and no byte past its end (which may move nearer
    while it runs: work stealing, or a stream given back)."""

    def __init__(self, fd: int, plan: RangePlan, asg: Assignment, xfer: StreamTransfer, stats: StreamStats,
                 keep_open: bool = True) -> None:
        self.fd, self.plan, self.asg, self.xfer, self.stats = fd, plan, asg, xfer, stats
        self.keep_open = keep_open  # False over TLS: the transport answers the close_notify
        self.buf = bytearray(read_chunk(len(plan.active)))
        self.view = memoryview(self.buf)
        self.done = asyncio.get_running_loop().create_future()
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport) -> None:
        self.transport = transport

    def get_buffer(self, sizehint: int):
        return self.view[:max(1, min(len(self.buf), self.asg.left))]

    def buffer_updated(self, nbytes: int) -> None:
        nbytes = min(nbytes, self.asg.left)  # (the 1-byte buffer of a range just ended)
        pwrite_all(self.fd, self.view[:nbytes], self.asg.pos)
        self.plan.advance(self.asg.worker, nbytes)
        self.xfer.moved += nbytes
        self.stats.bytes += nbytes
        if self.asg.done:
            self.stop()

    def stop(self) -> None:
        if self.transport is not None:
            self.transport.pause_reading()
        self._end(None)

    def eof_received(self) -> bool:
        if not self.asg.done:
            self._end(FTPError(f"the server ended the data at {self.asg.pos}, before {self.asg.end}"
                               " (did the file change?)", transient=False))
        return self.keep_open

    def connection_lost(self, exc: Exception | None) -> None:
        self._end(exc if exc is not None and not self.asg.done else None)

    def _end(self, exc: Exception | None) -> None:
        settle(self.done, exc)


class RangedGet:
    """The workers of one ranged download."""

    def __init__(self, loc, ctl: ControlConnection, fd: int, plan: RangePlan, opts: TransferOptions,
                 streams: int, controller=None) -> None:
        self.loc, self.fd, self.plan = loc, fd, plan
        # per stream: no bar of its own, no deadline of its own (the driver's)
        self.opts = replace(opts, progress=False, max_time=None, deadline=None)  # (the monitor stops it)
        self.spare = [FlowControl(ctl)]  # idle control connections
        self.wanted = streams
        self.controller = controller
        self.stats: list[StreamStats] = []
        self.sinks: dict[int, _RangeSink] = {}
        self.retired: set[int] = set()
        self.tasks: dict[int, asyncio.Task] = {}
        self.ctl = ctl
        self.ctls: list[ControlConnection] = []  # opened here, closed here
        self.first_error: BaseException | None = None
        self.refused_sessions = 0
        self.drs_replies = 0
        self.server_last: dict = {}

    @property
    def held(self):
        return self.plan.held

    def samples(self) -> list[StreamSample]:
        out = []
        for sink in self.sinks.values():
            st = sink.xfer.tuner.stats
            out.append(StreamSample(sink.xfer.tuner.last_rtt, st.rtt_min, st.retransmits))
        return out

    def path_sample(self) -> sharing.PathSample | None:
        """The path as the server's senders report it (each session's last
        DRS reply; tuning/count/sharing.py)."""
        return sharing.from_pairs(sink.xfer.server_last for sink in self.sinks.values())

    def cap_windows(self, per_stream: int | None) -> None:
        """-P auto's window for each running data connection (None: the host's cap)."""
        for sink in self.sinks.values():
            sink.xfer.tuner.cap_size(per_stream)

    def add_stream(self) -> bool:
        return self.plan.can_take() and self.start_worker()

    def remove_stream(self) -> bool:
        return self.retire_one()

    def summary(self) -> dict:
        rows = [s.as_dict() for s in self.stats if s.ranges]  # (not a worker that got no session)
        rtts = [r["rtt_min_ms"] for r in rows if r["rtt_min_ms"] is not None]
        avgs = [r["rtt_avg_ms"] for r in rows if r["rtt_avg_ms"] is not None]
        return {"tuning": self.opts.tuning, "rtt_min_ms": min(rtts) if rtts else None,
                "rtt_avg_ms": round(sum(avgs) / len(avgs), 3) if avgs else None,
                "retransmits": sum(r["retransmits"] for r in rows), "per_stream": rows}

    @property
    def moved(self) -> int:
        return sum(s.bytes for s in self.stats)

    def start_worker(self) -> bool:
        w = len(self.stats)
        if not self.plan.missing:
            return False
        self.stats.append(StreamStats(w))
        self.tasks[w] = asyncio.ensure_future(self._worker(w))
        return True

    def retire_one(self) -> bool:
        """-P auto gives a stream back: the one with the least left ends now."""
        live = [a for a in self.plan.active.values() if a.worker not in self.retired]
        if len(live) <= 1:
            return False
        victim = min(live, key=lambda a: a.left)
        self.retired.add(victim.worker)
        self.plan.give_back(victim.worker)
        sink = self.sinks.get(victim.worker)
        if sink is not None:
            sink.stop()
        return True

    async def run(self) -> None:
        self.plan.split(self.wanted)
        for _ in range(self.wanted):
            if not self.start_worker():
                break
        try:
            while True:
                live = [t for t in self.tasks.values() if not t.done()]
                if not live:
                    break
                await asyncio.wait(live, return_when=asyncio.FIRST_COMPLETED)
                for t in live:
                    if t.done() and not t.cancelled() and t.exception() is not None and self.first_error is None:
                        self.first_error = t.exception()
                if self.first_error is not None:
                    raise self.first_error
                # a worker found no range: others still run; a range freed by a
                # failed or retired worker needs one to take it
                if self.plan.missing and not any(not t.done() for t in self.tasks.values()):
                    self.start_worker()
        finally:
            for t in self.tasks.values():
                t.cancel()
            await asyncio.gather(*self.tasks.values(), return_exceptions=True)
            for s in self.stats:
                s.ended = s.ended or time.monotonic()
            await asyncio.gather(*(c.close() for c in self.ctls), return_exceptions=True)
            self.drs_replies = sum(s.drs_replies for s in self.stats)

    async def _worker(self, w: int) -> None:
        stats = self.stats[w]
        fc = self.spare.pop() if self.spare else None
        try:
            while w not in self.retired:
                asg = self.plan.take(w)
                if asg is None:
                    break
                try:
                    if fc is None:
                        fc = await self._open_session(w)
                        if fc is None:
                            return  # the server takes no more sessions: fewer streams
                    settled = await self._fetch(fc, asg, stats)
                finally:
                    self.plan.release(w)
                if not settled:
                    await fc.ctl.close()
                    fc = None
        finally:
            stats.ended = time.monotonic()
            if fc is not None:
                self.spare.append(fc)

    async def _open_session(self, w: int) -> FlowControl | None:
        """Another control session; None when the server refuses it while
        other sessions run (a per-address limit: vsftpd's max_per_ip,
        pyftpdlib's max_cons_per_ip answer 421)."""
        try:
            ctl = await open_logged_in(self.loc, self.opts)
        except FTPError as exc:
            others = any(not t.done() for i, t in self.tasks.items() if i != w)
            if not others:
                raise
            if not self.refused_sessions:
                log.warning("the server refused another session (%s): fewer streams", exc)
            self.refused_sessions += 1
            return None
        self.ctls.append(ctl)
        return FlowControl(ctl)

    async def _fetch(self, fc: FlowControl, asg: Assignment, stats: StreamStats) -> bool:
        """One range over one data connection.  Returns whether the control
        connection is in step again (ready for the next range)."""
        ctl = fc.ctl
        # SO_RCVLOWAT batching off over TLS: a close_notify is smaller than a batch
        tuner = SocketTuner(self.opts.tuning, Role.RECEIVER, allow_force=self.opts.force_buffers, parallel=True,
                            batch_reads=ctl.tls is None)
        stats.tuner = tuner
        xfer = StreamTransfer(fc, tuner, self.opts, self.loc.path, None, 0)
        sock = await xfer.open_data()
        transport = None
        try:
            rest = [(f"REST {asg.pos}", "ranged get (REST)")] if asg.pos else []
            pending = await fc.start_after(rest, f"RETR {self.loc.path}")  # one batch
            await fc.started(pending, f"cannot retrieve {self.loc.path}")
            tuner.attach(sock)
            stats.ranges += 1
            transport, sink = await start_data(
                sock, lambda: _RangeSink(self.fd, self.plan, asg, xfer, stats, keep_open=ctl.tls is None),
                ctl.tls, ctl.host, self.opts.connect_timeout)
            self.sinks[asg.worker] = sink
            io = asyncio.ensure_future(_wait(sink.done))
            await drive_data(io, xfer)
        finally:
            self.sinks.pop(asg.worker, None)
            stats.summaries.append(tuner.summary())
            stats.drs_replies += xfer.drs_replies
            self.server_last = xfer.server_last or self.server_last
            if transport is not None:
                transport.abort()
            sock.close()
        return await _settle(fc, pending)


async def _wait(fut: asyncio.Future) -> None:
    await fut


async def _settle(fc: FlowControl, pending) -> bool:
    """The data connection is closed: the RETR ends with 226 (all sent
    before the close), 426 or 451 (cut short), whichever; without a reply,
    ABOR (RFC 959 4.1.3).  False: the session is out of step."""
    try:
        fc.ended(pending, await asyncio.wait_for(asyncio.shield(pending.final), SETTLE_TIMEOUT))
        return fc.flow.state is State.READY
    except (TimeoutError, FTPError):
        pass
    try:
        abor = fc.send("ABOR")
        await asyncio.wait_for(asyncio.gather(pending.final, abor.final), SETTLE_TIMEOUT)
        fc.ended(pending, pending.final.result())
        return fc.flow.state is State.READY
    except (TimeoutError, FTPError, FlowError):
        return False
