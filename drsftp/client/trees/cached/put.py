"""Dataset puts over extended block mode with cached data channels (GFD.20;
GridFTP's ``-fast -pp``): one session's streams carry file after file,
each stream's DRS state, window and congestion window kept (the put side
of drsftp.client.trees.cached.get; docs/DATASETS.md, "Cached data channels").

The session connects its N streams once (``MODE E``, ``EPSV``); each file
is ``ALLO size`` + ``STOR path``, the next file's sent while the current
one runs (a drsftp server runs it after, in order: docs/EBLOCK.md,
"Pipelined transfers").  A stream sends a file's blocks only once the
server answered that STOR 1yz: bytes sent for a STOR the server refused
would be read as the next transfer's.  Every stream ends its part of every
file with an EOD; the last to finish adds EOF and the EOD count (all the
session's streams).  A file is done at its 226: the server has every
byte and renamed the upload.  Over TLS each stream encrypts through its
own TLS connection (drsftp.client.streams.modee.base).
"""

from __future__ import annotations

import asyncio
import functools
import os
import socket
import time
from collections import deque
from dataclasses import dataclass, field

from ....ftp.blockplan import block_size
from ....ftp.eblock import HEADER_SIZE, data_header, eod
from ....io import sockopt
from ....tuning import Role
from ...result import TransferResult
from ...session.control import ControlConnection, FTPError, Pending, os_reason
from ...session.flowctl import FlowControl, pasv_hint
from ...streams.modee.send import BlockQueue
from ...streams.modee.stream import BlockStream
from ...transfer.options import TransferOptions
from .session import CachedFile, CachedSession

CHUNK = 1 << 20  # bytes read and sent at a time
FIRST_BUFFER = 64 << 10  # a stream's buffer at first (it grows to a CHUNK as blocks need)


@dataclass
class FilePut(CachedFile):
    """One STOR on a cached session."""

    seq: int
    local: str
    remote: str
    size: int
    mtime: float  # the local file's, when it was opened (MFMT after its 226)
    fd: int
    blocks: BlockQueue
    stor: Pending
    go: asyncio.Event = field(default_factory=asyncio.Event)  # 1yz came, or the file will never start


class CachedPuts(CachedSession):
    """One session's cached streams and the files stored on it."""

    role = Role.SENDER

    def __init__(self, ctl: ControlConnection, opts: TransferOptions, wanted: int) -> None:
        super().__init__(ctl, opts, wanted)
        # the files requested, in command order, from the oldest a writer has
        # still to pass (``first`` is its seq): those every writer passed are let go
        self.order: deque[FilePut] = deque()
        self.first = 0
        self.seq = 0
        self.at: dict[int, int] = {}  # each writer's next file (seq)
        self.wake = asyncio.Event()  # a file was requested

    async def open(self) -> None:
        """MODE E and the server's address, then the N streams."""
        host, port = await FlowControl(self.ctl).passive_address(before=[("MODE E", "extended block mode (MODE E)")])
        for _ in range(self.wanted):
            try:
                stream = await self.connect_stream(host, port)
            except (TimeoutError, OSError) as exc:
                if not self.opened:
                    raise FTPError(f"cannot open data connection to {host}:{port}: {os_reason(exc)}"
                                   f"{pasv_hint(self.ctl, host)}") from exc
                break
            # each file's last send (its tail and EOD) goes at once, not
            # after the ACK of the file before (Nagle's rule: docs/DESIGN.md#eod-nodelay)
            sockopt.set_nodelay(stream.sock)
            self.spawn(self.tick(stream))
        for stream in self.opened:
            self.at[stream.index] = 0  # (before any writer runs: none is let go it has to send)
            self.spawn(self._writer(stream))

    # -- requests ----------------------------------------------------------
    def request(self, local: str, remote: str) -> FilePut:
        if self.broken is not None:
            raise self.broken
        fd = os.open(local, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
        try:
            st = os.fstat(fd)
            size = st.st_size
            self.ctl.start(f"ALLO {size}")  # (its reply says nothing the STOR's does not)
            stor = self.ctl.start(f"STOR {remote}")
        except BaseException:
            os.close(fd)
            raise
        blocks = BlockQueue([(0, size)] if size else [], block_size(size, len(self.opened)))
        blocks.joined = len(self.opened)  # every stream takes part in every file
        fp = FilePut(self.seq, local, remote, size, st.st_mtime, fd, blocks, stor)
        self.seq += 1
        self.order.append(fp)
        self.files.append(fp)
        stor.preliminary.add_done_callback(functools.partial(self._on_first, fp))
        stor.final.add_done_callback(functools.partial(self._on_final, fp))
        self.wake.set()
        return fp

    def _on_first(self, fp: FilePut, fut: asyncio.Future) -> None:
        if fut.cancelled() or fut.exception() is not None:
            return
        if fut.result().preliminary:
            fp.state, fp.started = "started", time.monotonic()
            fp.go.set()

    def _on_final(self, fp: FilePut, fut: asyncio.Future) -> None:
        if fut.cancelled() or fut.exception() is not None:
            self.fail(FTPError(f"STOR {fp.remote}: control connection lost"))
            return
        fp.reply = reply = fut.result()
        if fp.state == "sent":  # refused before it started: no stream sends it
            fp.state = "refused"
            fp.go.set()
            self.finish(fp, FTPError(f"cannot store {fp.remote}: {reply}", reply))
        elif reply.code in (226, 250):
            self.finish(fp, None)
        else:
            self.fail(FTPError(f"STOR {fp.remote} failed: {reply}", reply))

    def fail(self, exc: FTPError) -> None:
        for fp in self.files:
            fp.go.set()  # (its writers skip it)
        self.break_session(exc)
        for s in self.opened:  # the writers see EPIPE; close() closes them after they end
            try:
                s.sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        self.wake.set()

    # -- the streams ---------------------------------------------------------
    async def _writer(self, stream: BlockStream) -> None:
        loop = asyncio.get_running_loop()
        # one buffer a stream: a block's header and its first chunk go in one
        # send, each chunk read straight into it (no per-chunk allocation);
        # a file's last chunk and its EOD go in one send too.  Sized to the
        # blocks sent: FIRST_BUFFER for small files, up to a CHUNK.
        buf = memoryview(bytearray(FIRST_BUFFER))
        seal = stream.tls.encrypt if stream.tls is not None else _clear  # PROT P: the stream's TLS
        k = 0
        carried = False  # this stream ended an earlier file
        try:
            while self.broken is None and not self.done:
                if k - self.first >= len(self.order):
                    self.wake.clear()
                    await self.wake.wait()
                    continue
                fp = self.order[k - self.first]
                await fp.go.wait()
                if fp.state != "started" or fp.fd < 0:
                    k = self._passed(stream, k)
                    continue
                fp.reused = fp.reused or carried
                held = 0  # bytes in buf not sent yet: a block's last chunk (sent with what follows)
                while (block := fp.blocks.next()) is not None:
                    offset, count = block
                    if held:
                        await loop.sock_sendall(stream.sock, seal(buf[:held]))
                        held = 0
                    want = 2 * HEADER_SIZE + min(CHUNK, count)  # (a header, a chunk, the EOD)
                    if len(buf) < want:
                        buf = memoryview(bytearray(max(want, min(2 * len(buf), 2 * HEADER_SIZE + CHUNK))))
                    buf[:HEADER_SIZE] = data_header(offset, count)
                    head, end = HEADER_SIZE, offset + count
                    while offset < end:
                        n = os.preadv(fp.fd, [buf[head:head + min(CHUNK, end - offset)]], offset)
                        if not n:
                            raise FTPError(f"{fp.local} shrank during the copy", transient=False)
                        offset += n
                        fp.bytes += n
                        stream.bytes += n
                        if offset < end:
                            await loop.sock_sendall(stream.sock, seal(buf[:head + n]))
                            head = 0
                        else:
                            held = head + n
                tail = eod(eof_streams=fp.blocks.finish())
                buf[held:held + len(tail)] = tail
                await loop.sock_sendall(stream.sock, seal(buf[:held + len(tail)]))
                k = self._passed(stream, k)
                carried = True
        except FTPError as exc:
            self.fail(exc)
        except OSError as exc:
            if self.broken is None and not self.done:
                self.fail(FTPError(f"data connection failed: {exc}"))

    def _passed(self, stream: BlockStream, k: int) -> int:
        """Stream's writer is done with file ``k``: the files every writer
        passed leave ``order``; its next file's seq."""
        self.at[stream.index] = k + 1
        low = min(self.at.values())
        while self.first < low and self.order:
            self.order.popleft()
            self.first += 1
        return k + 1

    async def close(self) -> None:
        self.done = True
        await self.end_tasks()
        for s in self.opened:
            s.sock.close()
            s.ended = s.ended or time.monotonic()
        for fp in list(self.files):
            self.finish(fp, FTPError("session closed"))

    def file_result(self, fp: FilePut, seconds: float, full: bool = True) -> TransferResult:
        return self.result(fp, "put", seconds, full, total_size=fp.size)


def _clear(data: bytes | memoryview) -> bytes | memoryview:
    return data
