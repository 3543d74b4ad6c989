"""MODE E (GridFTP extended block mode, GFD.20) data path of ``drsftp serve``.

The control connection's MODE E state (esession.py) starts transfers
here; this module runs N data connections ("streams") on pyftpdlib's
ioloop with dispatchers of its own and moves bytes only: the block codec
and the receiver's ledger are sans-IO (drsftp/ftp/eblock.py).

Rules (GFD.20, extended block mode; docs/EBLOCK.md):
- the sender connects: RETR/MLSD after PORT/EPRT connect N streams
  (``OPTS RETR Parallelism=N,N,N;``), STOR after PASV/EPSV accepts them;
- blocks go out on whichever stream is free, header then payload
  (os.sendfile); each stream ends with EOD, the last one with EOF|EOD
  carrying the EOD count; streams stay open for the session's next
  transfer (GridFTP's cached data channels) unless sent CLOSE;
- the receiver writes each block at its offset (os.pwrite) in the
  ``.NAME.part`` file that stream-mode STOR uses, renamed when the
  ledger is complete and, with ALLO, the size matches, removed when the
  STOR that started it (no REST) fails before writing a byte;
- every stream has its own SocketTuner (DRS per stream, --buffer-budget);
- under PROT P every stream runs TLS, the server as TLS server (etls.py):
  the same blocks inside it, read and written through the stream's TLS
  (no sendfile).
"""

from __future__ import annotations

import errno
import logging
import os
import socket
import ssl
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..fileio import pwrite_all
from ..ftp import blockplan
from ..ftp.eblock import (
    BlockDecoder,
    BlockError,
    Data,
    EndOfFile,
    RangeSet,
    ReceiveLedger,
    data_header,
    eod,
)
from ..tlsbio import reason
from ..tuner import SocketTuner
from ..tuning import Role
from .etls import StreamTLS
from .partfile import discard_if_empty

if TYPE_CHECKING:
    from .esession import ESession

log = logging.getLogger("drsftp.server")

RECV_CHUNK = 1 << 20  # one recv_into per MiB
SEND_CHUNK = 4 << 20  # bytes per sendfile() call
TLS_CHUNK = 512 << 10  # plaintext per TLS write (read from the file, encrypted, queued)
MARKER_INTERVAL = 2.0  # seconds between 112/111 markers during STOR
_LOST = (errno.EPIPE, errno.ECONNRESET, errno.ENOTCONN, errno.ETIMEDOUT, errno.ECONNABORTED)


@dataclass
class Limits:
    """Bounds a hostile peer cannot pass (docs/EBLOCK.md, "Limits")."""

    per_session: int = 64  # streams one session may hold open
    per_server: int = 256  # streams all sessions together may hold open
    max_file: int = 1 << 44  # an upload's limit without ALLO (16 TiB)
    max_block: int = 64 << 20  # bytes one block header may announce
    max_ranges: int = 65536  # disjoint ranges an upload may hold (the ledger's memory)


class StreamCount:
    """Open streams of one server (shared by its sessions)."""

    def __init__(self) -> None:
        self.open = 0

    def take(self, limit: int) -> bool:
        if self.open >= limit:
            return False
        self.open += 1
        return True

    def give(self) -> None:
        self.open = max(self.open - 1, 0)


def plain_ip(ip: str) -> str:
    return ip.removeprefix("::ffff:")


class _Channel:
    """A socket on pyftpdlib's ioloop: the poller calls readable/writable,
    handle_read_event/handle_write_event, handle_close and close."""

    def __init__(self, ioloop, sock: socket.socket) -> None:
        self.ioloop = ioloop
        self.socket = sock
        self._fileno = sock.fileno()
        self._events: int | None = None
        self.closed = False

    def want(self, events: int) -> None:
        if self.closed or events == self._events:
            return
        if self._events is None:
            self.ioloop.register(self._fileno, self, events)
        else:
            self.ioloop.modify(self._fileno, events)
        self._events = events

    def readable(self) -> bool:
        return True

    def writable(self) -> bool:
        return True

    def handle_read_event(self) -> None:
        pass

    def handle_write_event(self) -> None:
        pass

    def handle_close(self) -> None:
        self.close()

    def handle_error(self) -> None:
        log.exception("MODE E data connection error")
        self.close()

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        if self._events is not None:
            self.ioloop.unregister(self._fileno)
        self.socket.close()


class Stream(_Channel):
    """One MODE E data connection; SENDER streams were connected by us,
    RECEIVER streams accepted.  It outlives a transfer (cached)."""

    def __init__(self, session: ESession, sock: socket.socket, role: Role) -> None:
        super().__init__(session.h.ioloop, sock)
        self.session = session
        self.role = role
        self.tuner: SocketTuner | None = None
        self.handshake: SocketTuner | None = None  # sized the handshake (outgoing)
        self.decoder = BlockDecoder(max_count=session.limits.max_block)
        self.connecting = False
        self.moved = 0  # bytes moved, for the tuner's rate
        self._tick_handle = None
        # sender state within a transfer
        self.pending = b""  # header bytes not yet sent
        self.pos = self.left = 0  # payload of the current block
        self.eod_queued = self.done = self.retire = False
        self.used = False  # carried a transfer before (125 "reusing")
        self.tls: StreamTLS | None = None  # PROT P: the stream's TLS (etls.py)

    def start(self, static_window: int | None) -> None:
        """Connected: tune it from now on (per-stream DRS)."""
        tuner = self.session.new_tuner(self.role)
        tuner.handshake_window = static_window
        tuner.attach(self.socket)
        self.tuner = tuner
        self._tick()

    def _tick(self) -> None:
        self._tick_handle = None
        if self.closed or self.tuner is None:
            return
        delay = self.tuner.tick(self.moved)
        if delay is not None:
            self._tick_handle = self.ioloop.call_later(delay, self._tick, _errback=self.handle_error)

    def secure(self, ctx: ssl.SSLContext | None) -> None:
        """Under PROT P (``ctx``): TLS with us as server; the client
        speaks first (RFC 4217 sec. 10)."""
        if ctx is not None:
            self.tls = StreamTLS(ctx, self.socket)

    def recv_into(self, buf: bytearray) -> int:
        """The stream's data (decrypted under PROT P), as socket.recv_into."""
        if self.tls is None:
            return self.socket.recv_into(buf)
        return self.tls.recv_into(memoryview(buf))

    def resume_reading(self) -> None:
        """Read again; data its TLS already holds is read now (its socket
        may never signal it)."""
        self.want(self.ioloop.READ)
        if self.tls is not None and self.tls.established and self.tls.buffered:
            self.ioloop.call_later(0, self.handle_read_event, _errback=self.handle_error)

    def _handshake(self) -> None:
        assert self.tls is not None
        try:
            done = self.tls.handshake_step()
        except (ssl.SSLError, OSError) as exc:
            return self.tls_failed(exc)
        if not done:
            return self.want(self.ioloop.READ | (self.ioloop.WRITE if self.tls.unsent else 0))
        job = self.session.job
        if isinstance(job, Send) and self in job.members and not self.done:
            self.want(self.ioloop.WRITE)
        elif self.role is Role.RECEIVER and isinstance(job, Receive) and not self.decoder.ended:
            self.resume_reading()
        else:
            self.want(self.ioloop.READ)

    def tls_failed(self, exc: BaseException) -> None:
        """A stream whose TLS handshake failed (a clear-text peer under PROT
        P, a client refusing the certificate): closed, never read; its
        transfer, or the next one, fails with 425."""
        log.warning("MODE E: TLS on a data connection failed: %s", reason(exc))
        reply = f"425 TLS negotiation failed on a data connection: {reason(exc)}."
        job = self.session.job
        self.close()
        if job is not None and job.role is self.role:
            job.fail(reply)
        else:
            self.session.stream_error = reply

    def new_transfer(self) -> None:
        self.used = True
        self.pending, self.pos, self.left = b"", 0, 0
        self.eod_queued = self.done = False
        if self.role is Role.RECEIVER:
            self.decoder.reset()

    # -- events ------------------------------------------------------------
    def handle_write_event(self) -> None:
        if self.connecting:
            err = self.socket.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
            if err:
                return self.lost(connect_failed(err))
            self.connecting = False
            hs, self.handshake = self.handshake, None
            assert hs is not None  # set by ESession.connect with connecting
            hs.after_handshake(self.socket, reserved_as=hs)  # ends the handshake's reservation
            self.start(hs.static_window)
            if self.tls is not None:
                return self.want(self.ioloop.READ)  # the ClientHello comes
        if self.tls is not None and not self.tls.established:
            try:
                self.tls.flush()
            except OSError as exc:
                return self.tls_failed(exc)
            return self.want(self.ioloop.READ | (self.ioloop.WRITE if self.tls.unsent else 0))
        job = self.session.job
        if isinstance(job, Send) and self in job.members and not self.done:
            job.pump(self)
        else:
            self.want(self.ioloop.READ)

    def handle_read_event(self) -> None:
        if self.tls is not None and not self.tls.established:
            return self._handshake()
        job = self.session.job
        if self.role is Role.RECEIVER and isinstance(job, Receive) and not self.decoder.ended:
            job.read(self)
            return
        # Between transfers: a closed connection leaves the cache; data
        # for a transfer not yet begun waits in the kernel.  Under TLS a
        # stream we send on is read through (a close_notify is data to
        # the kernel; the receiver has nothing else to say on it).
        if self.tls is not None and self.role is Role.SENDER:
            peek = self._read_idle_tls()
            if peek is None:
                return
        else:
            try:
                peek = self.socket.recv(1, socket.MSG_PEEK)
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                peek = b""
        if not peek:
            self.lost("426 Data connection closed by the peer; transfer aborted.")
        elif isinstance(job, Send) and self in job.members and not self.done:
            self.want(self.ioloop.WRITE)  # a receiver has nothing to say on it: keep sending
        else:
            self.want(0)

    def _read_idle_tls(self) -> bytes | None:
        """What the client sent on a stream we send on, decrypted and
        dropped: b"" once it ended, None if nothing whole came."""
        assert self.tls is not None
        try:
            n = self.tls.recv_into(memoryview(bytearray(1 << 16)))
        except (BlockingIOError, InterruptedError):
            return None
        except OSError:  # ssl.SSLError among them
            n = 0
        return b"x" if n else b""

    def handle_close(self) -> None:
        if self.connecting:
            self.lost(connect_failed(self.socket.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)))
        else:
            self.lost("426 Data connection lost; transfer aborted.")

    def lost(self, reply: str) -> None:
        """The connection failed or the peer closed it."""
        job = self.session.job
        member = job is not None and self in job.members and not self.done
        if isinstance(job, Receive):
            member = self in job.members and not self.decoder.ended
        self.close()
        if member and job is not None:
            job.fail(reply)

    def close(self) -> None:
        if self.closed:
            return
        if self._tick_handle is not None:
            self._tick_handle.cancel()
            self._tick_handle = None
        for tuner in (self.tuner, self.handshake):
            if tuner is not None:
                drain = tuner.close()  # before the socket closes: it reads the queue
                if drain:
                    self.ioloop.call_later(drain, tuner.release)
        super().close()
        self.session.stream_closed(self)


def connect_failed(err: int) -> str:
    """The reply for a stream we were connecting that ended with ``err``
    (SO_ERROR) before we saw it connected.  RFC 959: 425 when the data
    connection could not be opened (refused, unreachable, timed out); 426
    when the peer had taken it and then closed or reset it (the connection
    closed, the transfer aborted), whichever the poller reported first."""
    if err in (0, errno.ECONNRESET, errno.EPIPE):
        return "426 Data connection closed by the peer; transfer aborted."
    return f"425 Cannot open data connection: {os.strerror(err)}."


class Listener(_Channel):
    """PASV/EPSV in MODE E: accepts the sending client's streams, from the
    control connection's address only, within the session's and the
    server's limits (extra connections are closed at once)."""

    def __init__(self, session: ESession, sock: socket.socket) -> None:
        super().__init__(session.h.ioloop, sock)
        self.session = session
        self.handshake = session.new_tuner(Role.RECEIVER)
        self.handshake.before_handshake(sock, reserve_as=self)  # accepted sockets inherit it
        sock.listen(session.limits.per_session)
        self.want(self.ioloop.READ)

    def handle_read_event(self) -> None:
        try:
            sock, addr = self.socket.accept()
        except (BlockingIOError, InterruptedError, ConnectionAbortedError):
            return
        s = self.session
        reason = s.refuse(addr[0])
        if reason:
            log.warning("MODE E: refused a data connection from %s: %s", addr[0], reason)
            sock.close()
            return
        sock.setblocking(False)
        self.handshake.after_handshake(sock, reserved_as=self)  # the reservation ends: its own tuner claims
        stream = Stream(s, sock, Role.RECEIVER)
        s.streams.append(stream)
        stream.secure(s.tls_context)
        stream.start(self.handshake.static_window)
        stream.want(self.ioloop.READ)

    def close(self) -> None:
        if not self.closed and self.session.h.buffer_budget is not None:
            self.session.h.buffer_budget.release(self)
        super().close()


# -- transfers -----------------------------------------------------------------


class Job:
    """One RETR/STOR/MLSD in MODE E: its streams, its data timeout."""

    role: Role  # the server's end: its streams of this role carry the transfer

    def __init__(self, session: ESession) -> None:
        self.session = session
        self.members: set[Stream] = set()  # the streams that carried it
        self.path: str | None = None  # the file as the client names it (None: a listing)
        self.finished = False
        self.started = self.last = time.monotonic()
        self.timeout = session.data_timeout  # (0: no limit, as pyftpdlib's DTP)
        self._timer = session.h.ioloop.call_later(self.timeout, self._check_timeout) if self.timeout else None

    def touch(self) -> None:
        self.last = time.monotonic()

    def _check_timeout(self) -> None:
        if self.finished:
            return
        idle = time.monotonic() - self.last
        if idle >= self.timeout:
            self.fail(f"426 Data connection timed out ({self.timeout:g} s without data); transfer aborted.")
        else:
            self._timer = self.session.h.ioloop.call_later(self.timeout - idle, self._check_timeout)

    @property
    def moved(self) -> int:
        """Payload bytes this transfer moved."""
        raise NotImplementedError

    def _end(self, complete: bool, failed: bool = False) -> bool:
        """The transfer ends (``complete``: with 226), before its final
        reply; ``failed``: the commands held behind it are not run."""
        if self.finished:
            return False
        self.finished = True
        if self._timer is not None:
            self._timer.cancel()
        if self.session.job is self:
            self.session.job = None
        self.session.transfer_ended(failed)
        self.session.log(self, complete)
        return True

    def fail(self, reply: str | None) -> None:
        """End with an error reply (None: the session is gone); the
        streams' state is unknown, so they leave the cache."""
        if not self._end(complete=False, failed=True):
            return
        for s in [s for s in self.session.streams if s.role is self.role]:
            s.close()
        self.cleanup()
        if reply:
            self.session.h.respond(reply)

    def cleanup(self) -> None:
        pass


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


class Send(Job):
    role = Role.SENDER

    def __init__(self, session: ESession, source, ranges: list[tuple[int, int]], streams: int) -> None:
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
                s.pos += n
                s.left -= n
                s.moved += n
                self.sent += n
                self.touch()
                continue
            if s.eod_queued:
                return self._flushed(s)
            self._next(s)

    def _next(self, s: Stream) -> None:
        """The stream's next block's header, or its EOD."""
        block = None if s.retire else self._plan.next(self.sending())
        if block is not None:
            s.pending = data_header(*block)
            s.pos, s.left = block
        else:
            # EOD on every stream; the last one also carries EOF and the
            # EOD count (every stream this transfer used) (GFD.20)
            last = all(o.eod_queued for o in self.members if o is not s)
            s.pending = eod(eof_streams=len(self.members) if last else None, close=s.retire)
            s.eod_queued = True

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
                n = len(data)
                s.pos += n
                s.left -= n
                s.moved += n
                self.sent += n
                self.touch()
            elif s.eod_queued:
                return self._flushed(s)
            else:
                self._next(s)

    def _lost(self, s: Stream, exc: OSError) -> None:
        s.close()
        self.fail(f"426 Data connection lost: {exc.strerror or reason(exc)}; transfer aborted.")

    def _flushed(self, s: Stream) -> None:
        s.done = True
        if s.retire:
            s.close()  # its EOD carried CLOSE
        else:
            s.want(self.session.h.ioloop.READ)
        if all(o.done for o in self.members) and self._end(complete=True):
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


class Receive(Job):
    role = Role.RECEIVER

    def __init__(self, session: ESession, fd: int, temp: str, final: str, expected: int | None,
                 base: RangeSet | None, fresh: bool = False) -> None:
        super().__init__(session)
        self.fd, self.temp, self.final, self.expected = fd, temp, final, expected
        self.fresh = fresh  # the part file was started anew (no REST): removed if it ends empty
        self.discarded = False
        limit = expected if expected is not None else session.limits.max_file
        self.ledger = ReceiveLedger(limit=limit, base=base)
        self.buf = bytearray(RECV_CHUNK)
        self._markers = session.h.ioloop.call_later(MARKER_INTERVAL, self._send_markers)

    @property
    def moved(self) -> int:
        return self.ledger.new_bytes

    def read(self, s: Stream) -> None:
        try:
            n = s.recv_into(self.buf)
        except (BlockingIOError, InterruptedError):
            return
        except ssl.SSLError as exc:  # a forged or broken record: the transfer's data is suspect
            s.close()
            return self.fail(f"426 TLS error on a data connection: {reason(exc)}; transfer aborted.")
        except OSError as exc:
            return s.lost(f"426 Data connection lost: {exc.strerror}; transfer aborted.")
        if n == 0:
            return s.lost("426 Data connection closed before its end of data (EOD); transfer aborted.")
        self.members.add(s)
        s.used = True
        s.moved += n
        self.touch()
        close = False
        try:
            for ev in s.decoder.feed(memoryview(self.buf)[:n]):
                if isinstance(ev, Data):
                    self.ledger.data(ev.offset, len(ev.data))  # bounds and overlap first
                    if len(self.ledger.received) > self.session.limits.max_ranges:
                        raise BlockError(f"more than {self.session.limits.max_ranges} disjoint ranges")
                    self._write(ev.offset, ev.data)
                elif isinstance(ev, EndOfFile):
                    self.ledger.end_of_file(ev)
                else:
                    self.ledger.end_of_data()
                    close = ev.close
        except BlockError as exc:
            return self.fail(f"451 Extended block mode error: {exc}; transfer aborted.")
        except OSError as exc:
            if exc.errno in (errno.ENOSPC, errno.EDQUOT):
                return self.fail("452 Insufficient storage space; transfer aborted.")
            return self.fail(f"451 Local error: {exc.strerror}; transfer aborted.")
        if close:
            s.close()  # EOD|CLOSE: the sender closes it next
        if self.ledger.complete:
            self._complete()

    def _write(self, offset: int, data: memoryview) -> None:
        pwrite_all(self.fd, data, offset)

    def _send_markers(self) -> None:
        if self.finished:
            return
        self._marker_replies()
        self._markers = self.session.h.ioloop.call_later(MARKER_INTERVAL, self._send_markers)

    def _marker_replies(self) -> None:
        """112 Perf Marker and 111 Range Marker, as GridFTP servers send them."""
        h = self.session.h
        h.push(f"112-Perf Marker\r\n Timestamp:  {time.time():.1f}\r\n Stripe Index: 0\r\n"
               f" Stripe Bytes Transferred: {self.ledger.new_bytes}\r\n Total Stripe Count: 1\r\n")
        h.respond("112 End.")
        if len(self.ledger.received):
            h.respond(f"111 Range Marker {self.ledger.received.marker()}")

    def _complete(self) -> None:
        """Every EOD came: rename if the file is whole (ALLO's size when
        announced), else keep the .part for a restart (451)."""
        if self.finished:
            return
        self._markers.cancel()
        self._marker_replies()
        reply = self._place()
        self._end(complete=reply.startswith("226"))
        self.session.h.respond(reply)

    def _place(self) -> str:
        """The file renamed into place, or kept: the final reply."""
        size = self.expected if self.expected is not None else self.ledger.size()
        missing = self.ledger.received.missing(size)
        try:
            if missing:
                raise _Incomplete(f"451 Upload incomplete: {size - sum(b - a for a, b in missing)} of {size}"
                                  " bytes")
            os.ftruncate(self.fd, size)
            os.close(self.fd)
            self.fd = -1
            if self.temp != self.final:
                os.replace(self.temp, self.final)
        except _Incomplete as exc:
            self.cleanup()
            return f"{exc}." if self.discarded else f"{exc}; kept for REST to resume."
        except OSError as exc:
            self.cleanup()
            return f"451 Cannot move the upload into place: {exc.strerror}."
        return "226 Transfer complete."

    def cleanup(self) -> None:
        """After a failure: a part file of its own with nothing written goes."""
        self._markers.cancel()
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1
        if self.fresh and self.temp != self.final:
            self.discarded = discard_if_empty(self.temp)


class _Incomplete(Exception):
    pass
