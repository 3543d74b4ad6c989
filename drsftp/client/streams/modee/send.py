"""A MODE E put's blocks onto its streams, from a thread per stream
(docs/PARALLEL.md, "Extended block mode"; docs/EBLOCK.md, "Data format").

One shared :class:`BlockQueue` hands out the transfer core's plan
(:mod:`drsftp.ftp.blockplan`) and says which stream's EOD carries the EOF
and the EOD count.  Each stream's thread sends a block's 17-byte header
(MSG_MORE) and its payload with sendfile, or copies to a peer on this host
(:mod:`.filesend`); over TLS it reads and encrypts the file's chunks itself
through the stream's :class:`~drsftp.io.tlsbio.TLSPipe` (docs/EBLOCK.md, "TLS
on the streams").
"""

from __future__ import annotations

import asyncio
import functools
import os
import socket
import threading
import time

from ....ftp.blockplan import BlockPlan
from ....ftp.eblock import data_header, eod
from ....io import sockopt
from ....io.tlsbio import TLSPipe
from ...transfer import filesend
from ...transfer.dataconn import settle
from .stream import BlockStream

TLS_CHUNK = 512 << 10  # plaintext a put stream encrypts at a time


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


class BlockSender:
    """The sending threads of one put: blocks from ``queue`` of the file
    ``fileno``, until the queue is empty or ``stop`` is set."""

    def __init__(self, queue: BlockQueue, fileno: int, stop: threading.Event) -> None:
        self.queue, self.fileno, self.stop = queue, fileno, stop

    def start(self, stream: BlockStream) -> asyncio.Future:
        """The stream's thread, started; the future ends with it (with
        what it failed with)."""
        loop = asyncio.get_running_loop()
        fut = loop.create_future()
        threading.Thread(target=self._thread, args=(stream, fut, loop), daemon=True,
                         name=f"drsftp-put-{stream.index}").start()
        return fut

    def _thread(self, stream: BlockStream, fut: asyncio.Future, loop: asyncio.AbstractEventLoop) -> None:
        exc: Exception | None = None
        try:
            self.send_stream(stream)
        except Exception as e:  # handed to the event loop, which reports it
            exc = e
        stream.ended = time.monotonic()
        try:
            loop.call_soon_threadsafe(functools.partial(settle, fut, exc, retrieved=True))  # (the put reads it)
        except RuntimeError:
            pass  # the loop has closed (--max-time, Ctrl-C): nobody waits for this stream any more

    def send_stream(self, stream: BlockStream) -> None:
        """Blocks from the shared queue until it is empty, then this
        stream's EOD (with the EOF and count if it is the last to finish);
        through the stream's TLS where it has one."""
        tls = stream.tls
        # the socket's own descriptor for the sending calls: the put may close
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
        send_all(stream.sock, end if tls is None else tls.encrypt(end), self.stop)

    def _send_block(self, fd: int, stream: BlockStream, offset: int, count: int) -> bool:
        """Header, then the payload (filesend, on ``fd``); False if stopped."""
        send_all(stream.sock, data_header(offset, count), self.stop, more=True)

        def sent(n: int) -> None:
            stream.bytes += n

        done = filesend.send_range(fd, self.fileno, offset, count, self.stop, stream.copy, sent)
        if done < count and not self.stop.is_set():
            raise OSError("the local file shrank")
        return done == count

    def _send_block_tls(self, tls: TLSPipe, stream: BlockStream, offset: int, count: int) -> bool:
        """The block through TLS: file chunks read, encrypted here (the ssl
        module lets other threads run meanwhile), the header with the first."""
        head = data_header(offset, count)
        sent = 0
        while sent < count:
            if self.stop.is_set():
                return False
            chunk = os.pread(self.fileno, min(TLS_CHUNK, count - sent), offset + sent)
            if not chunk:
                raise OSError("the local file shrank")
            send_all(stream.sock, tls.encrypt(head + chunk if head else chunk), self.stop)
            head = b""
            sent += len(chunk)
            stream.bytes += len(chunk)
        return True


def send_all(sock: socket.socket, data: bytes, stop: threading.Event, more: bool = False) -> None:
    """All of ``data`` on the blocking ``sock`` (SO_SNDTIMEO set), unless
    ``stop`` is set meanwhile; ``more``: more follows at once (MSG_MORE)."""
    view = memoryview(data)
    flags = socket.MSG_MORE if more else 0  # the header goes out with its payload
    while view and not stop.is_set():
        try:
            n = sock.send(view, flags)
        except BlockingIOError:
            continue  # SO_SNDTIMEO passed
        view = view[n:]


async def drain_stream(stream: BlockStream, limit: float = 60.0) -> None:
    """Until the peer acknowledged what the stream sent."""
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        info = sockopt.tcp_info(stream.sock)
        if not info or (info.get("unacked", 0) == 0 and info.get("notsent_bytes", 0) == 0):
            return
        await asyncio.sleep(0.005)
