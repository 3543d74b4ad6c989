"""Parallel transfers in extended block mode (GFD.20), against servers that
list PARALLEL in FEAT (globus-gridftp-server, drsftp serve).

In MODE E the side that sends the data connects (docs/PARALLEL.md):

* get: ``MODE E``, ``OPTS RETR Parallelism=N,N,N;``, ``PORT``/``EPRT`` to a
  listener on the control connection's local address, (``REST a-b,c-d``:
  the ranges already held), ``RETR``; the server connects N streams.  Each
  is decoded by :class:`~drsftp.ftp.eblock.BlockDecoder` and checked by one
  :class:`~drsftp.ftp.eblock.ReceiveLedger` before a byte is written
  (pwrite at the block's offset); complete when EOF came and as many EODs
  as it counts, and the server said 226.
* put: ``MODE E``, ``EPSV``/``PASV``, ``ALLO size``, ``STOR``; the client
  connects N streams, each pulling the next block from one shared queue
  (sent from a thread per stream: client/filesend.py), ending with EOD|CLOSE, and the last
  to finish with EOF carrying the EOD count of every stream used.

Over TLS (the control connection's AUTH TLS, PROT P) every stream runs TLS
with the client as TLS client whichever side connected (RFC 4217 sec. 10),
the certificate checked as the control connection's and its session
offered: a get's streams through asyncio's TLS transport, a put's through
a :class:`~drsftp.tlsbio.TLSPipe` its sending thread encrypts with
(docs/EBLOCK.md, "TLS on the streams").

Every stream has its own SocketTuner.  Against a server that offers DRS the
DRS command carries per-session sums over the streams plus ``streams=N``
(the minimum RTT), and the peer's rate and window are divided by the
number of streams before each tuner takes them (EBLOCK contract).
"""

from __future__ import annotations

import asyncio
import functools
import logging
import os
import socket
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from .. import sockopt
from ..fileio import pwrite_all
from ..ftp import drsexchange
from ..ftp.blockplan import BlockPlan, block_size
from ..ftp.eblock import (
    BlockDecoder,
    BlockError,
    Data,
    EndOfData,
    EndOfFile,
    RangeSet,
    ReceiveLedger,
    data_header,
    eod,
)
from ..ftp.flow import TransferDone
from ..tlsbio import TLSPipe
from ..tuner import SocketTuner
from ..tuning import Role
from ..tuning.streams import StreamSample
from . import filesend
from .control import ControlConnection, FTPError
from .dataconn import accept_data, active_command, connect_data, listen_for_data, open_tls_stream, settle, tls_handshake
from .drsclient import DRSDriver, DRSFigures, drs_enabled
from .flowctl import FlowControl
from .rangeplan import read_chunk
from .transfer import SEND_POLL, TransferOptions

log = logging.getLogger("drsftp.client")
ACCEPT_LIMIT = 256  # data connections one RETR may open, at most (a hostile server's flood)
TLS_CHUNK = 512 << 10  # plaintext a put stream encrypts at a time


@dataclass
class Stream:
    """One data connection's state and figures."""

    index: int
    sock: socket.socket
    tuner: SocketTuner
    bytes: int = 0
    blocks: int | None = None  # sent (put); a receiver sees fragments, not blocks
    started: float = field(default_factory=time.monotonic)
    ended: float | None = None
    retire: bool = False  # -P auto: end after the current block
    tls: TLSPipe | None = None  # a put stream's TLS (a get's is its transport's)
    copy: bool = False  # a put stream sends copies, not sendfile (a peer on this host: filesend)

    def sample(self) -> StreamSample:
        st = self.tuner.stats
        return StreamSample(self.tuner.last_rtt, st.rtt_min, st.retransmits)

    def as_dict(self) -> dict:
        s = self.tuner.summary()
        secs = (self.ended or time.monotonic()) - self.started
        return {"stream": self.index, "bytes": self.bytes, "blocks": self.blocks, "seconds": round(secs, 4),
                "mbps": round(self.bytes * 8 / secs / 1e6, 3) if secs > 0 else 0.0,
                "rtt_min_ms": s["rtt_min_ms"], "rtt_avg_ms": s["rtt_avg_ms"], "retransmits": s["retransmits"],
                "peak_rcvbuf": s["peak_rcvbuf"], "peak_sndbuf": s["peak_sndbuf"]}


class _ModeE(DRSFigures):
    """What get and put share: the streams, their tuners, the DRS sums."""

    role: Role

    def __init__(self, ctl: ControlConnection, opts: TransferOptions, streams: int) -> None:
        self.ctl, self.opts, self.want = ctl, opts, streams
        self.streams: list[Stream] = []
        self.drs = DRSDriver(drs_enabled(ctl, opts), self._on_peer_report)
        self.done = False
        self._tasks: set[asyncio.Task] = set()
        self._rate_marks: deque[tuple[float, int]] = deque()  # (time, received): rate(window)

    def spawn(self, coro) -> None:
        """A background task, referenced until it ends (the loop keeps only
        weak references)."""
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def cancel_tasks(self) -> None:
        for task in list(self._tasks):
            task.cancel()

    async def end_tasks(self) -> None:
        """Cancel the background tasks and wait for them: a cancelled
        sock_accept removes its reader one loop turn later, by which time a
        closed listener's descriptor may belong to a new transport."""
        tasks = list(self._tasks)
        self.cancel_tasks()
        await asyncio.gather(*tasks, return_exceptions=True)

    @property
    def moved(self) -> int:
        return sum(s.bytes for s in self.streams)

    @property
    def received(self) -> int:
        """Bytes the streams carried (the cached sessions' ``moved`` counts
        only their open files)."""
        return sum(s.bytes for s in self.streams)

    def rate(self, window: float | None = None) -> float:
        """Bytes per second the streams carried since the first opened; with
        ``window``, over about the last ``window`` seconds (from a mark kept
        at each call): what they carry now, not an average that lags a slow
        start by its whole length."""
        first = min((st.started for st in self.streams), default=None)
        if first is None:
            return 0.0
        now, got = time.monotonic(), self.received
        overall = got / max(now - first, 1e-3)
        if window is None:
            return overall
        marks = self._rate_marks
        marks.append((now, got))
        while len(marks) > 2 and now - marks[1][0] >= window:
            marks.popleft()
        t0, b0 = marks[0]
        return (got - b0) / (now - t0) if now - t0 >= window / 2 else overall

    async def connect_stream(self, host: str, port: int) -> Stream:
        """One stream connected to the server (the side that sends connects,
        GFD.20), tuned from before its handshake; OSError/TimeoutError if
        it cannot be."""
        tuner = self.new_tuner()
        sock = await connect_data(self.ctl, (host, port), tuner, self.opts.connect_timeout)
        tuner.attach(sock)
        pipe = None
        if self.ctl.tls is not None:
            try:
                pipe = await tls_handshake(sock, self.ctl.tls, self.ctl.host, self.opts.connect_timeout)
            except BaseException:
                sock.close()
                raise
        stream = Stream(len(self.streams), sock, tuner, tls=pipe)
        self.streams.append(stream)
        return stream

    def fail(self, exc: FTPError) -> None:
        """A stream the server connected failed its TLS: the transfer cannot
        go on (gets end it here; a put's streams raise from connect_stream)."""
        raise exc

    async def accept_streams(self, listener: socket.socket, protocol) -> None:
        """The server's streams, from the control connection's peer only
        (RFC 2577 sec. 5), each tuned and read by ``protocol(stream)``."""
        loop = asyncio.get_running_loop()
        peer = self.ctl.writer.get_extra_info("peername")[0]
        for _ in range(ACCEPT_LIMIT):
            accepted = await accept_data(listener, peer, self.new_tuner)
            if accepted is None:
                continue
            conn, tuner = accepted
            tuner.attach(conn)
            stream = Stream(len(self.streams), conn, tuner)
            self.streams.append(stream)
            factory = functools.partial(protocol, stream)
            if self.ctl.tls is None:
                await loop.create_connection(factory, sock=conn)
                self.spawn(self.tick(stream))
            else:  # each stream's handshake on its own: N round trips at once
                self.spawn(self._secure_stream(conn, factory, stream))

    async def _secure_stream(self, conn: socket.socket, factory, stream: Stream) -> None:
        """An accepted stream's TLS, the client's end; a failure fails
        the transfer with its one sentence."""
        assert self.ctl.tls is not None
        try:
            await open_tls_stream(conn, factory, self.ctl.tls, self.ctl.host, self.opts.connect_timeout)
        except FTPError as exc:
            conn.close()
            stream.ended = time.monotonic()
            self.fail(exc)
            return
        except BaseException:  # cancelled with the transfer mid-handshake
            conn.close()
            raise
        self.spawn(self.tick(stream))

    def samples(self) -> list[StreamSample]:
        return [s.sample() for s in self.streams if s.ended is None]

    def new_tuner(self) -> SocketTuner:
        # no read batching: a cached MODE E connection ends with a 17-byte
        # EOD and stays open, below any SO_RCVLOWAT
        tuner = SocketTuner(self.opts.tuning, self.role, allow_force=self.opts.force_buffers, batch_reads=False,
                            parallel=True)
        tuner.note_control_rtt(self.ctl.writer.get_extra_info("socket"))
        return tuner

    async def tick(self, stream: Stream) -> None:
        """The stream's tuner, every fraction of an RTT, while it runs."""
        while stream.ended is None and not self.done:
            delay = stream.tuner.tick(stream.bytes) or 0.1
            if stream is next((s for s in self.streams if s.ended is None), None) and self.drs_wanted():
                # one exchange per session, from the first live stream's ticks
                rtt = min((s.tuner.last_rtt for s in self.streams if s.tuner.last_rtt), default=None)
                self.drs.maybe_send(self.ctl.start, rtt, self.session_report)
            await asyncio.sleep(delay)

    def drs_wanted(self) -> bool:
        """Whether a DRS exchange says anything now (a cached session: only
        while a file is on the wire)."""
        return True

    def session_report(self) -> dict[str, int]:
        """Sums over the live streams (rtt_us: the least).  A sender adds
        ``streams=N``, the number running; a drsftp server sending (RETR)
        takes streams=N as the number to run, so a receiver sends it only
        to change it (request_streams; docs/EBLOCK.md, "DRS")."""
        live = [s for s in self.streams if s.ended is None] or self.streams[:1]
        streams = len(live) if self.role is Role.SENDER else None
        return drsexchange.session_report((s.tuner.report() for s in live), streams)

    def request_streams(self, n: int) -> None:
        """Ask a drsftp server (the sender) to run ``n`` streams from now on."""
        self.drs.ask(self.ctl.start, {"streams": n})

    def _on_peer_report(self, pairs: dict[str, int], seconds: float) -> None:
        """The peer's session sums, shared evenly by the live streams' tuners."""
        live = [s for s in self.streams if s.ended is None]
        share = drsexchange.stream_share(pairs, len(live))
        for s in live:
            s.tuner.on_peer_pairs(share)

    def summary(self) -> dict:
        rows = [s.as_dict() for s in self.streams]
        rtts = [r["rtt_min_ms"] for r in rows if r["rtt_min_ms"] is not None]
        avgs = [r["rtt_avg_ms"] for r in rows if r["rtt_avg_ms"] is not None]
        return {"tuning": self.streams[0].tuner.tuning.describe() if self.streams else self.opts.tuning,
                "rtt_min_ms": min(rtts) if rtts else None,
                "rtt_avg_ms": round(sum(avgs) / len(avgs), 3) if avgs else None,
                "retransmits": sum(r["retransmits"] or 0 for r in rows),
                "per_stream": rows}


# -- get --------------------------------------------------------------------------


class _BlockSink(asyncio.BufferedProtocol):
    def __init__(self, owner: ModeEGet, stream: Stream) -> None:
        self.owner, self.stream = owner, stream
        self.decoder = BlockDecoder(max_count=owner.ledger.limit or (1 << 40))
        self.buf = bytearray(read_chunk(owner.want))
        self.view = memoryview(self.buf)
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport) -> None:
        self.transport = transport

    def get_buffer(self, sizehint: int):
        return self.view  # not the bytearray: asyncio's TLS transport fills slices of it (transfer.py)

    def buffer_updated(self, nbytes: int) -> None:
        try:
            for ev in self.decoder.feed(self.view[:nbytes]):
                if isinstance(ev, Data):
                    n = len(ev.data)
                    self.owner.ledger.data(ev.offset, n)  # bounds and overlap, before the write
                    pwrite_all(self.owner.fd, ev.data, ev.offset)
                    self.stream.bytes += n
                elif isinstance(ev, EndOfFile):
                    self.owner.ledger.end_of_file(ev)
                elif isinstance(ev, EndOfData):
                    self.owner.ledger.end_of_data()
                    self.stream.ended = time.monotonic()
        except (BlockError, OSError) as exc:
            self.owner.fail(FTPError(f"extended block mode: {exc}", transient=False))
            return
        self.owner.progress()

    def eof_received(self) -> bool:
        if not self.decoder.ended and not self.owner.ledger.complete:
            self.owner.fail(FTPError("a data connection closed before its EOD"))
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        if exc is not None and not self.decoder.ended:
            self.owner.fail(FTPError(f"data connection failed: {exc}"))


class ModeEGet(_ModeE):
    role = Role.RECEIVER

    def __init__(self, ctl: ControlConnection, opts: TransferOptions, streams: int, path: str, fd: int,
                 size: int, held: RangeSet) -> None:
        super().__init__(ctl, opts, streams)
        self.path, self.fd, self.size = path, fd, size
        self.ledger = ReceiveLedger(limit=size, base=held)
        self.complete = asyncio.get_running_loop().create_future()
        self.sinks: list[_BlockSink] = []
        self._last_data = time.monotonic()

    @property
    def held(self) -> RangeSet:
        return self.ledger.received

    def fail(self, exc: Exception) -> None:
        if not self.complete.done():
            self.complete.set_exception(exc)
        self.abort_sinks()

    def progress(self) -> None:
        self._last_data = time.monotonic()
        if self.ledger.complete and not self.complete.done():
            self.complete.set_result(None)

    def add_stream(self) -> bool:
        return self._ask(self.want + 1)

    def remove_stream(self) -> bool:
        return self.want > 1 and self._ask(self.want - 1)

    def _ask(self, n: int) -> bool:
        """Only a drsftp server (DRS) changes its streams during a RETR."""
        if not self.use_drs:
            return False
        self.want = n
        self.request_streams(n)
        return True

    async def run(self) -> None:
        if self.size and not self.ledger.received.missing(self.size):
            return  # the .part holds it all already (--continue)
        fc, n = FlowControl(self.ctl), self.want
        listener = listen_for_data(self.ctl, self.new_tuner())
        accept = None
        try:
            # one batch: none of these replies decides what is sent next
            # (docs/DESIGN.md "Pipelined session setup")
            steps = [("MODE E", "extended block mode (MODE E)"),
                     (f"OPTS RETR Parallelism={n},{n},{n};", "OPTS RETR Parallelism"), active_command(listener)]
            if self.ledger.received.total:
                steps.append((f"REST {self.ledger.received.marker()}", "restart (REST ranges)"))
            accept = asyncio.ensure_future(self.accept_streams(listener, self._sink))
            pending = await fc.start_after(steps, f"RETR {self.path}")
            await fc.started(pending, f"cannot retrieve {self.path}")
            await self._until_complete(pending)
            reply = await asyncio.wait_for(asyncio.shield(pending.final), 60)
            if not isinstance(fc.ended(pending, reply), TransferDone):
                raise FTPError(f"RETR {self.path} failed: {reply}", reply)
            if self.ledger.received.missing(self.size):
                raise FTPError(f"short transfer: {self.ledger.received.total} of {self.size} bytes"
                               " (--continue resumes)")
        finally:
            self.done = True
            self.cancel_tasks()
            if self.complete.done() and not self.complete.cancelled():
                self.complete.exception()  # (raised above if it mattered)
            if accept is not None:
                accept.cancel()
                await asyncio.gather(accept, return_exceptions=True)  # (end_tasks says why)
            listener.close()
            self.abort_sinks()
            for s in self.streams:
                s.ended = s.ended or time.monotonic()

    async def _until_complete(self, pending) -> None:
        """EOF and all EODs, or the server's error, or a stall."""
        while not self.complete.done():
            if pending.final.done():
                reply = pending.final.result() if pending.final.exception() is None else None
                if reply is None or reply.code >= 400:
                    raise FTPError(f"RETR {self.path} failed: {reply}", reply)
            if time.monotonic() - self._last_data > self.opts.idle_timeout:
                raise FTPError(f"data connections stalled for {self.opts.idle_timeout:.0f} s")
            # (a 226 may come before the last blocks are read: then wait on data alone)
            await asyncio.wait([self.complete] + ([] if pending.final.done() else [pending.final]),
                               timeout=0.5, return_when=asyncio.FIRST_COMPLETED)
        self.complete.result()

    def abort_sinks(self) -> None:
        for sink in self.sinks:
            if sink.transport is not None:
                sink.transport.abort()

    def _sink(self, stream: Stream) -> _BlockSink:
        sink = _BlockSink(self, stream)
        self.sinks.append(sink)
        return sink


# -- put --------------------------------------------------------------------------


class BlockQueue:
    """The blocks still to send, shared by the sending threads; it also
    decides which stream's EOD carries the EOF (the last to finish) and
    the EOD count (every stream that joined)."""

    def __init__(self, ranges: list[tuple[int, int]], block: int, streams: int | None = None) -> None:
        """``streams``: the streams the taper plans for (blockplan); None: no taper."""
        self._plan = BlockPlan(ranges, block)
        self._streams = streams
        self._lock = threading.Lock()
        self.joined = 0
        self.finished = 0

    def join(self) -> bool:
        """A stream is about to connect; False once nothing is left to send
        (the first always joins: an empty file still needs its EOF)."""
        with self._lock:
            if self._plan.done and self.joined:
                return False
            self.joined += 1
            return True

    def leave(self) -> bool:
        """A stream that joined could not connect.  True if the others have
        all finished meanwhile, none of them with the EOF (it was owed to
        this one): the transfer cannot end cleanly."""
        with self._lock:
            self.joined -= 1
            return 0 < self.finished == self.joined

    def next(self) -> tuple[int, int] | None:
        with self._lock:
            return self._plan.next(self._streams)

    def finish(self) -> int | None:
        """This stream is done: the EOD count if it is the last one."""
        with self._lock:
            self.finished += 1
            return self.joined if self.finished == self.joined and self._plan.done else None

    @property
    def empty(self) -> bool:
        return self._plan.done


class ModeEPut(_ModeE):
    role = Role.SENDER

    def __init__(self, ctl: ControlConnection, opts: TransferOptions, streams: int, path: str, f, total: int,
                 held: RangeSet | None = None, on_held: Callable[[RangeSet], None] | None = None) -> None:
        """``held``: the ranges the server holds from an interrupted put
        (--continue): sent as ``REST a-b,...`` (GFD.20 restart), and only the
        missing blocks go.  ``on_held`` gets what the server reports holding
        (111 Range Marker) as it comes, for the resume record."""
        super().__init__(ctl, opts, streams)
        self.path, self.f, self.total = path, f, total
        self.held = RangeSet(list(held or ()))
        self.server_held = RangeSet(list(self.held))  # and what the server's range markers added since
        self.on_held = on_held
        missing = self.held.missing(total)
        self.queue = BlockQueue(missing, block_size(sum(b - a for a, b in missing), streams), streams)
        self.threads: list[asyncio.Future] = []
        self.connecting = 0  # streams joined, not yet connected
        self.late_failure: FTPError | None = None
        self.stop = threading.Event()
        self.address: tuple[str, int] | None = None

    def samples(self) -> list[StreamSample]:
        return [s.sample() for s in self.streams if s.ended is None and not s.retire]

    def add_stream(self) -> bool:
        if self.address is None or self.queue.empty:
            return False
        self.spawn(self._late_connect())
        return True

    def remove_stream(self) -> bool:
        live = [s for s in self.streams if s.ended is None and not s.retire]
        if len(live) <= 1:
            return False
        live[-1].retire = True
        return True

    async def run(self) -> None:
        fc = FlowControl(self.ctl)
        self.address = await fc.passive_address(before=[("MODE E", "extended block mode (MODE E)")])
        try:
            # ALLO and STOR together; the streams connect while their
            # replies come (as they did before the STOR's 150)
            steps = [(f"ALLO {self.total}", "ALLO")]
            if self.held.total:
                steps.append((f"REST {self.held.marker()}", "restart (REST ranges)"))
            sent = fc.send_all(steps)
            pending = fc.send(f"STOR {self.path}")
            pending.on_mark = self._on_marker
            outcome = await asyncio.gather(fc.check(sent, pending),
                                           *(self._connect() for _ in range(self.want)), return_exceptions=True)
            for exc in outcome:
                if isinstance(exc, BaseException):
                    raise exc
            if not self.streams:
                raise FTPError(f"cannot open a data connection to {self.address[0]}:{self.address[1]}")
            await fc.started(pending, f"cannot store {self.path}")
            await self._until_sent(pending)
            for s in self.streams:
                await _drain(s)
                s.sock.close()
            reply = await asyncio.wait_for(asyncio.shield(pending.final), 120)
            if not isinstance(fc.ended(pending, reply), TransferDone):
                raise FTPError(f"STOR {self.path} failed: {reply}", reply)
        finally:
            self.done = True
            self.stop.set()
            self.cancel_tasks()
            for s in self.streams:
                s.sock.close()

    def _on_marker(self, reply) -> None:
        """``111 Range Marker a-b,c-d``: ranges the server holds (GFD.20);
        one past the file's end is ignored (a hostile or confused server)."""
        _, sep, text = reply.first.partition("Range Marker")
        if reply.code != 111 or not sep:
            return
        try:
            ranges = RangeSet.parse(text)
        except ValueError:
            return
        if any(b > self.total for _, b in ranges):
            return
        for a, b in ranges:
            self.server_held.add(a, b)
        if self.on_held is not None:
            self.on_held(self.server_held)

    async def _until_sent(self, pending) -> None:
        last_progress = (time.monotonic(), -1)
        while True:
            live = [t for t in self.threads if not t.done()]
            for t in self.threads:
                if t.done() and t.exception() is not None:
                    raise FTPError(f"data connection failed: {t.exception()}") from t.exception()
            if self.late_failure is not None:
                raise self.late_failure
            if not live and not self.connecting:
                return
            if pending.final.done() and (pending.final.exception() or pending.final.result().code >= 400):
                reply = None if pending.final.exception() else pending.final.result()
                raise FTPError(f"STOR {self.path} failed: {reply}", reply)
            moved = self.moved
            if moved != last_progress[1]:
                last_progress = (time.monotonic(), moved)
            elif time.monotonic() - last_progress[0] > self.opts.idle_timeout:
                raise FTPError(f"data connections stalled for {self.opts.idle_timeout:.0f} s")
            if live:
                await asyncio.wait(live, timeout=0.5)
            else:
                await asyncio.sleep(0.05)  # a stream still connecting

    async def _connect(self) -> None:
        if not self.queue.join():
            return
        self.connecting += 1
        try:
            await self._connect_joined()
        finally:
            self.connecting -= 1

    async def _late_connect(self) -> None:
        """-P auto's extra stream (a failure that matters is late_failure)."""
        try:
            await self._connect()
        except FTPError:
            pass

    async def _connect_joined(self) -> None:
        assert self.address is not None  # run() sets it before any stream joins
        host, port = self.address
        try:
            stream = await self.connect_stream(host, port)
        except (TimeoutError, OSError) as exc:
            if self.queue.leave() or not self.streams:
                self.late_failure = FTPError(f"cannot open data connection to {host}:{port}: {exc}")
                raise self.late_failure from exc
            log.info("one more data connection failed: %s", exc)
            return
        sockopt.block_with_send_timeout(stream.sock, SEND_POLL)
        stream.copy = sockopt.peer_on_this_host(stream.sock)
        fut = asyncio.get_running_loop().create_future()
        self.threads.append(fut)
        threading.Thread(target=self._send_thread, args=(stream, fut, asyncio.get_running_loop()),
                         daemon=True, name=f"drsftp-put-{stream.index}").start()
        self.spawn(self.tick(stream))

    def _send_thread(self, stream: Stream, fut: asyncio.Future, loop: asyncio.AbstractEventLoop) -> None:
        exc: Exception | None = None
        try:
            self._send_blocks(stream)
        except Exception as e:  # handed to the event loop, which reports it
            exc = e
        stream.ended = time.monotonic()
        try:
            loop.call_soon_threadsafe(functools.partial(settle, fut, exc, retrieved=True))  # read by _until_sent
        except RuntimeError:
            pass  # the loop has closed (--max-time, Ctrl-C): nobody waits for this stream any more

    def _send_blocks(self, stream: Stream) -> None:
        """Blocks from the shared queue until it is empty, then this
        stream's EOD (with the EOF and count if it is the last to finish);
        through the stream's TLS where it has one."""
        tls = stream.tls
        # the socket's own descriptor for the sending calls: run() may close
        # the socket while this thread sends, and its number reused by then
        # must not get the file's bytes
        fd = os.dup(stream.sock.fileno()) if tls is None else -1
        send_block = functools.partial(self._send_block, fd) if tls is None else \
            functools.partial(self._send_block_tls, tls)
        try:
            while not self.stop.is_set():
                block = None if stream.retire else self.queue.next()
                if block is None:
                    break
                if not send_block(stream, *block):
                    return  # stopped
                stream.blocks = (stream.blocks or 0) + 1
        finally:
            if fd >= 0:
                os.close(fd)
        if self.stop.is_set():
            return
        end = eod(eof_streams=self.queue.finish(), close=True)
        _send_all(stream.sock, end if tls is None else tls.encrypt(end), self.stop)

    def _send_block(self, fd: int, stream: Stream, offset: int, count: int) -> bool:
        """Header, then the payload (filesend, on ``fd``); False if stopped."""
        _send_all(stream.sock, data_header(offset, count), self.stop, more=True)

        def sent(n: int) -> None:
            stream.bytes += n

        done = filesend.send_range(fd, self.f.fileno(), offset, count, self.stop, stream.copy, sent)
        if done < count and not self.stop.is_set():
            raise OSError("the local file shrank")
        return done == count

    def _send_block_tls(self, tls: TLSPipe, stream: Stream, offset: int, count: int) -> bool:
        """The block through TLS: file chunks read, encrypted here (the ssl
        module lets other threads run meanwhile), the header with the first."""
        head = data_header(offset, count)
        sent = 0
        while sent < count:
            if self.stop.is_set():
                return False
            chunk = os.pread(self.f.fileno(), min(TLS_CHUNK, count - sent), offset + sent)
            if not chunk:
                raise OSError("the local file shrank")
            _send_all(stream.sock, tls.encrypt(head + chunk if head else chunk), self.stop)
            head = b""
            sent += len(chunk)
            stream.bytes += len(chunk)
        return True


def _send_all(sock: socket.socket, data: bytes, stop: threading.Event, more: bool = False) -> None:
    view = memoryview(data)
    flags = socket.MSG_MORE if more else 0  # the header goes out with its payload
    while view and not stop.is_set():
        try:
            n = sock.send(view, flags)
        except BlockingIOError:
            continue  # SO_SNDTIMEO passed
        view = view[n:]


async def _drain(stream: Stream, limit: float = 60.0) -> None:
    """Until the peer acknowledged what the stream sent."""
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        info = sockopt.tcp_info(stream.sock)
        if not info or (info.get("unacked", 0) == 0 and info.get("notsent_bytes", 0) == 0):
            return
        await asyncio.sleep(0.005)
