"""A get in extended block mode (GFD.20; docs/PARALLEL.md, "Extended block
mode"), from a server that lists PARALLEL in FEAT (globus-gridftp-server,
drsftp serve).

``MODE E``, ``OPTS RETR Parallelism=N,N,N;``, ``PORT``/``EPRT`` to a
listener on the control connection's local address, (``REST a-b,c-d``:
the ranges already held), ``RETR``, in one batch; the server connects N
streams.  Each is decoded (:class:`~.stream.BlockSink`) and checked by
one :class:`~drsftp.ftp.eblock.ReceiveLedger` before a byte is written
(pwrite at the block's offset); complete when EOF came and as many EODs as
it counts, and the server said 226.  Only a drsftp server changes its
streams during a RETR (``DRS streams=N``: docs/EBLOCK.md, "DRS").
"""

from __future__ import annotations

import asyncio
import time

from ....ftp.eblock import RangeSet, ReceiveLedger
from ....ftp.flow import TransferDone
from ....tuning import Role
from ...session.control import ControlConnection, FTPError
from ...session.flowctl import FlowControl
from ...transfer.dataconn import active_command, listen_for_data
from ...transfer.options import TransferOptions
from .base import ModeESession
from .stream import BlockSink, BlockStream


class ModeEGet(ModeESession):
    role = Role.RECEIVER

    def __init__(self, ctl: ControlConnection, opts: TransferOptions, wanted: int, path: str, fd: int,
                 size: int, held: RangeSet) -> None:
        super().__init__(ctl, opts, wanted)
        self.path, self.fd, self.size = path, fd, size
        self.ledger = ReceiveLedger(limit=size, base=held)
        self.complete = asyncio.get_running_loop().create_future()
        self.sinks: list[BlockSink] = []
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
        return self._ask(self.wanted + 1)

    def remove_stream(self) -> bool:
        return self.wanted > 1 and self._ask(self.wanted - 1)

    def _ask(self, n: int) -> bool:
        """Only a drsftp server (DRS) changes its streams during a RETR."""
        if not self.use_drs:
            return False
        self.wanted = n
        self.request_streams(n)
        return True

    async def run(self) -> None:
        if self.size and not self.ledger.received.missing(self.size):
            return  # the .part holds it all already (--continue)
        fc, n = FlowControl(self.ctl), self.wanted
        self.send_drs = fc.send
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
            for s in self.opened:
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

    def _sink(self, stream: BlockStream) -> BlockSink:
        sink = BlockSink(self, stream)
        self.sinks.append(sink)
        return sink
