"""A put in extended block mode (GFD.20; docs/PARALLEL.md, "Extended block
mode"), to a server that lists PARALLEL in FEAT.

``MODE E``, ``EPSV``/``PASV``, ``ALLO size``, (``REST a-b,c-d``: the ranges
the server holds, ``--continue``), ``STOR``; the client connects N
streams while the replies come, each sending blocks from one shared queue
from a thread of its own (:mod:`.send`), ending with EOD|CLOSE, the
last to finish with EOF carrying the EOD count of every stream used.  The
server's ``111 Range Marker`` replies say what it holds, for the resume
record (docs/PARALLEL.md, "Resume").  ``-P auto`` adds a stream or lets
one end after its current block.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable

from ....ftp.blockplan import block_size
from ....ftp.eblock import RangeSet, marker_ranges
from ....ftp.flow import TransferDone
from ....io import sockopt
from ....tuning import Role
from ....tuning.count.streams import StreamSample
from ...session.control import ControlConnection, FTPError, os_reason
from ...session.flowctl import FlowControl
from ...transfer.filesend import SEND_POLL
from ...transfer.options import TransferOptions
from .base import ModeESession
from .send import BlockQueue, BlockSender, drain_stream

log = logging.getLogger("drsftp.client")
SERVER_WHY_WAIT = 5.0  # seconds a failed stream waits for the server's final reply, which names the cause


class ModeEPut(ModeESession):
    role = Role.SENDER

    def __init__(self, ctl: ControlConnection, opts: TransferOptions, wanted: int, path: str, f, total: int,
                 held: RangeSet | None = None, on_held: Callable[[RangeSet], None] | None = None) -> None:
        """``held``: the ranges the server holds from an interrupted put
        (--continue): sent as ``REST a-b,...`` (GFD.20 restart), and only the
        missing blocks go.  ``on_held`` gets what the server reports holding
        (111 Range Marker) as it comes, for the resume record."""
        super().__init__(ctl, opts, wanted)
        self.path, self.f, self.total = path, f, total
        self.held = RangeSet(list(held or ()))
        self.server_held = RangeSet(list(self.held))  # and what the server's range markers added since
        self.on_held = on_held
        missing = self.held.missing(total)
        self.queue = BlockQueue(missing, block_size(sum(b - a for a, b in missing), wanted), wanted)
        self.threads: list[asyncio.Future] = []
        self.connecting = 0  # streams joined, not yet connected
        self.late_failure: FTPError | None = None
        self.stop = threading.Event()
        self.sender = BlockSender(self.queue, f.fileno(), self.stop)
        self.address: tuple[str, int] | None = None

    def samples(self) -> list[StreamSample]:
        return [s.sample() for s in self.opened if s.ended is None and not s.retire]

    def add_stream(self) -> bool:
        if self.address is None or self.queue.empty:
            return False
        self.spawn(self._late_connect())
        return True

    def remove_stream(self) -> bool:
        live = [s for s in self.opened if s.ended is None and not s.retire]
        if len(live) <= 1:
            return False
        live[-1].retire = True
        return True

    async def run(self) -> None:
        fc = FlowControl(self.ctl)
        self.send_drs = fc.send
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
            self.open_exchange()
            outcome = await asyncio.gather(fc.check(sent, pending),
                                           *(self._connect() for _ in range(self.wanted)), return_exceptions=True)
            for exc in outcome:
                if isinstance(exc, BaseException):
                    raise exc
            if not self.opened:
                raise FTPError(f"cannot open a data connection to {self.address[0]}:{self.address[1]}")
            await fc.started(pending, f"cannot store {self.path}")
            await self._until_sent(pending)
            await self._drained(pending)
            reply = await asyncio.wait_for(asyncio.shield(pending.final), 120)
            if not isinstance(fc.ended(pending, reply), TransferDone):
                raise FTPError(f"STOR {self.path} failed: {reply}", reply)
        finally:
            self.done = True
            self.stop.set()
            self.cancel_tasks()
            for s in self.opened:
                s.sock.close()

    def open_exchange(self) -> None:
        """The session's first DRS, behind the transfer command and before
        any stream carries a byte: the server answers it while its transfer
        runs however short that is (a stream's first tick may come after
        the last byte; docs/PROTOCOL.md, "DRS in extended block mode").
        Nothing is measured yet: a bare ``DRS``."""
        self.drs.maybe_send(self.send_drs, None, dict)

    def _on_marker(self, reply) -> None:
        """``111 Range Marker a-b,c-d``: ranges the server holds (GFD.20);
        one past the file's end is ignored (a hostile or confused server)."""
        for a, b in marker_ranges(reply.first, self.total) if reply.code == 111 else ():
            self.server_held.add(a, b)
        if self.on_held is not None:
            self.on_held(self.server_held)

    async def _drained(self, pending) -> None:
        """Until the server acknowledged what the streams sent (each then
        closed), or its error reply came first: a server that failed (452,
        storage full) after the last block went into the kernel's buffers
        acknowledges no more of it."""
        async def drain_all() -> None:
            for s in self.opened:
                await drain_stream(s)
                s.sock.close()

        drain = asyncio.ensure_future(drain_all())
        try:
            await asyncio.wait([drain, pending.final], return_when=asyncio.FIRST_COMPLETED)
            final = pending.final
            if not drain.done() and final.done() and final.exception() is None and final.result().code >= 400:
                raise FTPError(f"STOR {self.path} failed: {final.result()}", final.result())
            await drain
        finally:
            drain.cancel()

    async def _why_failed(self, pending, exc: BaseException) -> None:
        """A stream failed: the server's final reply (452 storage full,
        451) says why better than the reset that its abort caused; else the
        stream's own error."""
        try:
            reply = await asyncio.wait_for(asyncio.shield(pending.final), SERVER_WHY_WAIT)
        except (TimeoutError, FTPError):
            reply = None
        if reply is not None and reply.code >= 400:
            raise FTPError(f"STOR {self.path} failed: {reply}", reply) from exc
        why = os_reason(exc) if isinstance(exc, OSError) else str(exc)
        raise FTPError(f"data connection failed: {why}") from exc

    async def _until_sent(self, pending) -> None:
        last_progress = (time.monotonic(), -1)
        while True:
            live = [t for t in self.threads if not t.done()]
            for t in self.threads:
                failure = t.exception() if t.done() else None
                if failure is not None:
                    await self._why_failed(pending, failure)
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
            if self.queue.leave() or not self.opened:
                self.late_failure = FTPError(f"cannot open data connection to {host}:{port}: {exc}")
                raise self.late_failure from exc
            log.info("one more data connection failed: %s", exc)
            return
        sockopt.block_with_send_timeout(stream.sock, SEND_POLL)
        stream.copy = sockopt.peer_on_this_host(stream.sock)
        self.threads.append(self.sender.start(stream))
        self.spawn(self.tick(stream))
