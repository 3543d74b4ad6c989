"""The sending end of a MODE E transfer in ``drsftp serve`` (RETR, MLSD):
blocks over the transfer's streams (GFD.20, extended block mode;
docs/EBLOCK.md, "Data format").

Rules:
- the block plan is the transfer core's (drsftp/ftp/blockplan.py): about
  8 blocks a stream, tapered toward the end over the streams still
  sending, so they end together;
- a block goes out on whichever stream is free, header then payload
  (os.sendfile; under PROT P read, encrypted and queued through the
  stream's TLS);
- each stream ends with EOD, the last one with EOF|EOD carrying the EOD
  count (every stream the transfer used); a stream retired by DRS
  streams=N ends with EOD|CLOSE and closes.
"""

from __future__ import annotations

import errno
import os
import socket
import tempfile

from ....ftp import blockplan
from ....ftp.eblock import data_header, eod
from ....io import sockopt
from ....io.tlsbio import reason
from ....tuning import Role
from ..listings import gather
from .job import Job, TransferSession
from .streams import Stream
from .tls import StreamTLS

SEND_CHUNK = 4 << 20  # bytes per sendfile() call
SPOOL_OVER = 1 << 20  # a listing past this many bytes goes through a temporary file (spooled)
INLINE = 64 << 10  # blocks (and what follows them) up to this many bytes go in one send with their headers
TLS_CHUNK = 512 << 10  # plaintext per TLS write (read from the file, encrypted, queued)
_LOST = (errno.EPIPE, errno.ECONNRESET, errno.ENOTCONN, errno.ETIMEDOUT, errno.ECONNABORTED)


class FileSource:
    def __init__(self, f) -> None:
        self.f = f
        self.size = os.fstat(f.fileno()).st_size

    def send(self, sock: socket.socket, pos: int, n: int) -> int:
        return os.sendfile(sock.fileno(), self.f.fileno(), pos, n)

    def read(self, pos: int, n: int) -> bytes:
        return os.pread(self.f.fileno(), n, pos)

    def close(self) -> None:
        self.f.close()


class BytesSource:
    def __init__(self, data: bytes) -> None:
        self.data = memoryview(data)
        self.size = len(data)

    def send(self, sock: socket.socket, pos: int, n: int) -> int:
        return sock.send(self.data[pos:pos + n])

    def read(self, pos: int, n: int) -> bytes:
        return bytes(self.data[pos:pos + n])

    def close(self) -> None:
        pass


def spooled(chunks, limit: int | None = None):
    """A source of the bytes ``chunks`` yield: in memory up to ``limit``
    bytes, past that in an unnamed temporary file, so a listing of any
    size holds at most ``limit`` bytes of the server's memory."""
    limit = SPOOL_OVER if limit is None else limit
    chunks = iter(chunks)
    held, size = gather(chunks, limit + 1)  # (past ``limit``: limit + 1 bytes at least)
    if size > limit:
        f = tempfile.TemporaryFile()  # noqa: SIM115 (closed with the source)
        try:
            f.writelines(held)
            held = []
            for rest in chunks:
                f.write(rest)
            f.flush()
            return FileSource(f)
        except BaseException:
            f.close()
            raise
    return BytesSource(b"".join(held))


class Send(Job):
    role = Role.SENDER

    def __init__(self, session: TransferSession, source, ranges: list[tuple[int, int]], streams: int) -> None:
        super().__init__(session)
        self.source = source
        total = sum(b - a for a, b in ranges)
        self._plan = blockplan.BlockPlan(ranges, blockplan.block_size(total, streams))
        self.sent = 0

    @property
    def moved(self) -> int:
        return self.sent

    def sending(self) -> int:
        """The streams still taking blocks (a stream retired by DRS
        streams=N takes no more): the plan's taper divides by them."""
        return max(sum(1 for m in self.members if not m.retire), 1)

    def pump(self, s: Stream) -> None:
        """Move this stream's next bytes: header, payload, next block, EOD."""
        if s.tls is not None:
            return self._pump_tls(s, s.tls)
        sock = s.socket
        while not self.finished:
            if s.pending:
                try:
                    n = sock.send(s.pending, socket.MSG_MORE if s.left else 0)
                except (BlockingIOError, InterruptedError):
                    return s.want(self.session.h.ioloop.WRITE)
                except OSError as exc:
                    return self._lost(s, exc)
                s.pending = s.pending[n:]
                continue
            if s.left:
                try:
                    n = self.source.send(sock, s.pos, min(s.left, SEND_CHUNK))
                except (BlockingIOError, InterruptedError):
                    return s.want(self.session.h.ioloop.WRITE)
                except OSError as exc:
                    if exc.errno in _LOST:
                        return self._lost(s, exc)
                    return self.fail(f"451 Local error: {exc.strerror}; transfer aborted.")
                if n == 0:
                    return self.fail("451 The file shrank during the transfer; transfer aborted.")
                self._advance(s, n)
                continue
            if s.eod_queued:
                return self._flushed(s)
            self._next(s)

    def _next(self, s: Stream) -> None:
        """The stream's next block's header, or its EOD.  Blocks of at most
        INLINE bytes are read and queued with their header, and what
        follows them too, up to INLINE bytes, so a small file's block and
        EOD go out in one send (not header, sendfile, EOD: three)."""
        while True:
            block = None if s.retire else self._plan.next(self.sending())
            if block is None:
                # EOD on every stream; the last one also carries EOF and the
                # EOD count (every stream this transfer used) (GFD.20)
                last = all(o.eod_queued for o in self.members if o is not s)
                s.pending += eod(eof_streams=len(self.members) if last else None, close=s.retire)
                s.eod_queued = True
                if not s.nodelay:  # the EOD goes now, not after the last tail's ACK (Nagle)
                    s.nodelay = True
                    sockopt.set_nodelay(s.socket)
                return
            pos, n = block
            s.pending += data_header(pos, n)
            s.pos, s.left = block
            if n > INLINE or len(s.pending) + n > INLINE:
                return
            try:
                data = self.source.read(pos, n)
            except OSError:
                return  # the send path meets the error and answers it
            s.pending += data
            got = len(data)
            s.pos += got
            s.left -= got
            s.moved += got
            self.sent += got
            if s.idle:
                s.bytes_moved()
            if s.left:  # the file shrank: the send path finds it
                return

    def _pump_tls(self, s: Stream, tls: StreamTLS) -> None:
        """pump() through the stream's TLS: the next plaintext is read and
        encrypted once the last went out."""
        if not tls.established:
            return  # its handshake's end wakes it
        while not self.finished:
            try:
                if not tls.flush():
                    return s.want(self.session.h.ioloop.WRITE)
            except OSError as exc:
                return self._lost(s, exc)
            if s.pending:
                tls.send(s.pending)
                s.pending = b""
            elif s.left:
                try:
                    data = self.source.read(s.pos, min(s.left, TLS_CHUNK))
                except OSError as exc:
                    return self.fail(f"451 Local error: {exc.strerror}; transfer aborted.")
                if not data:
                    return self.fail("451 The file shrank during the transfer; transfer aborted.")
                tls.send(data)
                self._advance(s, len(data))
            elif s.eod_queued:
                return self._flushed(s)
            else:
                self._next(s)

    def _lost(self, s: Stream, exc: OSError) -> None:
        s.close()
        self.fail(f"426 Data connection lost: {exc.strerror or reason(exc)}; transfer aborted.")

    def _advance(self, s: Stream, n: int) -> None:
        """``n`` bytes of stream ``s``'s block went out."""
        s.pos += n
        s.left -= n
        s.moved += n
        self.sent += n
        self.touch()
        if s.idle:
            s.bytes_moved()

    def _flushed(self, s: Stream) -> None:
        s.done = True
        if s.retire:
            s.close()  # its EOD carried CLOSE
        else:
            s.want(self.session.h.ioloop.READ)
        if all(o.done for o in self.members):
            with self.session.h.replies_together():  # the 226 and the replies of the commands it releases
                if self._end(complete=True):
                    self.cleanup()
                    self.session.h.respond("226 Transfer complete.")

    def cleanup(self) -> None:
        self.source.close()

    def set_streams(self, n: int) -> None:
        """DRS streams=N: connect more streams or retire surplus ones."""
        active = [s for s in self.members if not s.retire and not s.eod_queued and not s.closed]
        if n > len(active):
            for _ in range(n - len(active)):
                s = self.session.connect()
                if s is None:
                    break
                s.new_transfer()
                self.members.add(s)
        else:
            # the idle ones first: a stream mid-block finishes it
            for s in sorted(active, key=lambda s: s.left > 0)[:len(active) - n]:
                s.retire = True
                if not s.connecting:
                    s.want(self.session.h.ioloop.WRITE)
