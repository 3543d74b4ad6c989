"""Dataset gets over extended block mode with cached data channels (GFD.20;
GridFTP's ``-fast -pp``): one session's streams carry file after file, so
each stream's DRS state, window and congestion window carry over, and the
next RETRs go out before the current one ends (a drsftp server runs them
in order: docs/EBLOCK.md, "Pipelined transfers").

Routing (docs/DATASETS.md, "Cached data channels"): every stream of the
session carries every transfer the server starts, in command order, and
ends its part of each with one EOD (the last with EOF and the EOD count).
The bytes after a stream's EOD belong to the next transfer the server
answered 1xx; while a transfer before it has no reply yet, the stream
pauses and its bytes wait in the kernel.  A transfer that fails after it
started leaves the streams in an unknown state: the session is dropped
and its unfinished files go back to the job's queue.
"""

from __future__ import annotations

import asyncio
import functools
import os
import socket
import time
from dataclasses import dataclass

from ....ftp.eblock import BlockDecoder, BlockError, Data, EndOfData, EndOfFile, RangeSet, ReceiveLedger
from ....ftp.partname import download_part
from ....io.fileio import pwrite_all
from ....tuning import Role
from ...result import TransferResult
from ...session.control import ControlConnection, FTPError, Pending
from ...streams.modee.stream import BlockStream, ReadBuffer
from ...streams.rangeplan import drop_record, held_prefix, read_chunk
from ...transfer.dataconn import active_command, listen_for_data
from ...transfer.options import TransferOptions
from .session import CachedFile, CachedSession

MAX_BLOCK = 1 << 40  # a block's count bound (the ledger checks offsets against overlap)


@dataclass
class FileGet(CachedFile):
    """One RETR on a cached session."""

    seq: int
    remote: str
    local: str
    size: int | None  # as listed (None: unknown)
    offset: int  # bytes already held in the .part (resume): [0, offset)
    mtime: float | None
    fd: int
    ledger: ReceiveLedger
    retr: Pending

    @property
    def part(self) -> str:
        return download_part(self.local)


class CachedGets(CachedSession):
    """One session's cached streams and the files requested on it."""

    role = Role.RECEIVER

    def __init__(self, ctl: ControlConnection, opts: TransferOptions, wanted: int) -> None:
        super().__init__(ctl, opts, wanted)
        self.seq = 0
        self.listener: socket.socket | None = None
        self.sinks: list[_CachedSink] = []
        self.refused = False  # the server refused MODE E's setup: stream mode for this job

    def open(self) -> None:
        """MODE E, the streams' number, and where the server connects them,
        sent with the first RETRs (docs/DESIGN.md "Pipelined session
        setup"): a refusal fails the session (``refused`` says so) before
        any file's data is trusted, as every RETR's reply comes after it."""
        self.listener = listen_for_data(self.ctl, self.new_tuner())
        n = self.wanted
        steps = [("MODE E", "extended block mode (MODE E)"),
                 (f"OPTS RETR Parallelism={n},{n},{n};", "OPTS RETR Parallelism"),
                 active_command(self.listener)]
        for line, what in steps:
            self.ctl.start(line).final.add_done_callback(functools.partial(self._on_setup, what))
        self.spawn(self.accept_streams(self.listener, self._sink))

    def _on_setup(self, what: str, fut: asyncio.Future) -> None:
        if fut.cancelled() or fut.exception() is not None:
            self.fail(FTPError(f"{what}: control connection lost"))
        elif fut.result().code != 200:
            self.refused = True
            self.fail(FTPError(f"{what} failed: {fut.result()}", fut.result()))

    # -- requests ----------------------------------------------------------
    def request(self, remote: str, local: str, size: int | None, offset: int, mtime: float | None) -> FileGet:
        """Send one file's RETR (after REST ranges when resuming)."""
        if self.broken is not None:
            raise self.broken
        part = download_part(local)
        flags = os.O_WRONLY | os.O_CREAT | getattr(os, "O_CLOEXEC", 0)
        if offset:  # (a -P get's part: only up to its record's first gap, not its holes)
            offset = min(offset, held_prefix(part, size))
            drop_record(part)  # (truncated to ``offset`` below: a prefix)
        if offset:
            fd = os.open(part, flags, 0o644)
        else:  # a new file: never an old one truncated in place (transfer.open_part)
            try:
                fd = os.open(part, flags | os.O_EXCL, 0o644)  # (one call where none is there)
            except FileExistsError:
                os.unlink(part)
                fd = os.open(part, flags | os.O_EXCL, 0o644)
        try:
            if offset and os.fstat(fd).st_size > offset:
                os.ftruncate(fd, offset)
            held = RangeSet([(0, offset)] if offset else [])
            if offset:
                self.ctl.start(f"REST 0-{offset}").final.add_done_callback(
                    functools.partial(self._on_rest, self.seq))
            retr = self.ctl.start(f"RETR {remote}")
        except BaseException:
            os.close(fd)
            raise
        fg = FileGet(self.seq, remote, local, size, offset, mtime, fd, ReceiveLedger(base=held), retr)
        self.seq += 1
        self.files.append(fg)
        retr.preliminary.add_done_callback(functools.partial(self._on_first, fg))
        retr.final.add_done_callback(functools.partial(self._on_final, fg))
        return fg

    def _on_rest(self, seq: int, fut: asyncio.Future) -> None:
        if fut.cancelled() or fut.exception() is not None:
            return
        if fut.result().code != 350:  # the server would send the whole file over the held bytes
            self.fail(FTPError(f"resume (REST) failed: {fut.result()}", fut.result()))

    def _on_first(self, fg: FileGet, fut: asyncio.Future) -> None:
        if fut.cancelled() or fut.exception() is not None:
            return
        if fut.result().preliminary:
            fg.state = "started"
            fg.started = time.monotonic()
        self._kick()

    def _on_final(self, fg: FileGet, fut: asyncio.Future) -> None:
        if fut.cancelled() or fut.exception() is not None:
            self.fail(FTPError(f"RETR {fg.remote}: control connection lost"))
            return
        fg.reply = reply = fut.result()
        if fg.state == "sent":  # answered without a 1xx: never started, the streams untouched
            fg.state = "refused"
            self.finish(fg, FTPError(f"cannot retrieve {fg.remote}: {reply}", reply))
            if not fg.offset:
                try:
                    os.unlink(fg.part)  # created for it, never written
                except FileNotFoundError:
                    pass
            self._kick()
            return
        if reply.code not in (226, 250):
            self.fail(FTPError(f"RETR {fg.remote} failed: {reply}", reply))
            return
        self.maybe_done(fg)

    def maybe_done(self, fg: FileGet) -> None:
        if fg.reply is None or not fg.ledger.complete or fg.done.done():
            return
        got = fg.ledger.size()
        if fg.ledger.received.missing(got):
            self.fail(FTPError(f"RETR {fg.remote}: holes in the data received", transient=False))
            return
        self.finish(fg, None)

    def finish(self, f, exc: BaseException | None) -> None:
        if exc is not None and isinstance(f, FileGet) and f.fd >= 0:
            # a cut RETR's part keeps only what is whole from its start: the
            # blocks came in any order, and a rerun resumes the part's size
            # with no record (rangeplan.held_prefix)
            whole = next((b for a, b in f.ledger.received if a == f.offset), f.offset)
            try:
                os.ftruncate(f.fd, whole)
            except OSError:
                pass
        super().finish(f, exc)

    def fail(self, exc: FTPError) -> None:
        self.break_session(exc)
        for sink in self.sinks:
            if sink.transport is not None:
                sink.transport.abort()

    # -- routing -----------------------------------------------------------
    def next_for(self, after: int) -> FileGet | bool | None:
        """The file a stream's next bytes belong to: the first after ``after``
        the server started; False: a reply before it is still awaited."""
        for fg in self.files:
            if fg.seq <= after or fg.state == "refused":
                continue
            return fg if fg.state == "started" else False
        return None

    def _kick(self) -> None:
        for sink in self.sinks:
            if sink.paused:
                sink.resume()

    def _sink(self, stream: BlockStream) -> _CachedSink:
        sink = _CachedSink(self, stream)
        self.sinks.append(sink)
        return sink

    async def close(self) -> None:
        self.done = True
        await self.end_tasks()
        for sink in self.sinks:
            if sink.transport is not None:
                sink.transport.abort()
        if self.listener is not None:
            self.listener.close()
        for fg in list(self.files):
            self.finish(fg, FTPError("session closed"))
        for s in self.opened:
            s.ended = s.ended or time.monotonic()

    def file_result(self, fg: FileGet, seconds: float, full: bool = True) -> TransferResult:
        return self.result(fg, "get", seconds, full, total_size=fg.ledger.size(), resumed_from=fg.offset)


class _CachedSink(asyncio.BufferedProtocol):
    """One cached stream: decodes blocks and routes them by transfer."""

    def __init__(self, owner: CachedGets, stream: BlockStream) -> None:
        self.owner, self.stream = owner, stream
        self.decoder = BlockDecoder(max_count=MAX_BLOCK)
        self.buf = ReadBuffer(read_chunk(owner.wanted))  # grows only as reads fill it
        self.transport: asyncio.Transport | None = None
        self.file: FileGet | None = None  # the transfer its bytes belong to now
        self.last = -1  # seq of the last transfer it ended (EOD)
        self.stash = b""  # bytes read past an EOD while the next transfer is unknown
        self.paused = False

    # asyncio.BufferedProtocol
    def connection_made(self, transport) -> None:
        self.transport = transport

    def get_buffer(self, sizehint: int):
        return self.buf.view  # not a bytearray: asyncio's TLS transport fills slices of it (streammode.FileSink)

    def buffer_updated(self, nbytes: int) -> None:
        self._consume(self.buf.view[:nbytes])
        self.buf.used(nbytes)

    def eof_received(self) -> bool:
        if not self.owner.done and (self.file is not None or self.owner.files):
            self.owner.fail(FTPError("a data connection closed during a transfer"))
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self.stream.ended = self.stream.ended or time.monotonic()
        if exc is not None and not self.owner.done:
            self.owner.fail(FTPError(f"data connection failed: {exc}"))

    def resume(self) -> None:
        stash, self.stash, self.paused = self.stash, b"", False
        if stash:
            self._consume(memoryview(stash))
        if not self.paused and self.transport is not None and not self.transport.is_closing():
            self.transport.resume_reading()

    def _consume(self, data: memoryview) -> None:
        pos, end = 0, len(data)
        try:
            while pos < end:
                fg = self.file
                if fg is None:
                    nxt = self.owner.next_for(self.last)
                    if not isinstance(nxt, FileGet):
                        if nxt is None:  # bytes for a transfer never asked for
                            raise BlockError("data on a cached connection with no transfer running")
                        self.stash = bytes(data[pos:end])  # a reply is awaited: wait for it
                        self.paused = True
                        if self.transport is not None:
                            self.transport.pause_reading()
                        return
                    self.file = fg = nxt
                    fg.reused = fg.reused or self.last >= 0
                    self.decoder.reset()
                events, used = self.decoder.feed_some(data[pos:end], stop_at_eod=True)
                pos += used
                for ev in events:
                    if isinstance(ev, Data):
                        n = len(ev.data)
                        fg.ledger.check(ev.offset, n)  # bounds and overlap, before the write
                        pwrite_all(fg.fd, ev.data, ev.offset)
                        fg.ledger.took(ev.offset, n)  # (held once written)
                        fg.bytes += n
                        self.stream.bytes += n
                    elif isinstance(ev, EndOfFile):
                        fg.ledger.end_of_file(ev)
                    elif isinstance(ev, EndOfData):
                        fg.ledger.end_of_data()
                        self.file, self.last = None, fg.seq
                        self.owner.maybe_done(fg)
        except (BlockError, OSError) as exc:
            self.owner.fail(FTPError(f"extended block mode: {exc}", transient=False))
