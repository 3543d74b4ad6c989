"""The data connections of MODE E (GridFTP extended block mode, GFD.20)
in ``drsftp serve``: streams (and the PASV listener, listener.py), on pyftpdlib's ioloop
with dispatchers of their own (docs/EBLOCK.md, "Data connections";
docs/DESIGN.md, "Extended block mode in the server").

Rules:
- the sender connects: RETR/MLSD after PORT/EPRT connect N streams
  (``OPTS RETR Parallelism=N,N,N;``), STOR after PASV/EPSV accepts them,
  from the control connection's address or a listed third-party peer's
  (ftp/thirdparty.py), within the session's and the server's limits
  (docs/EBLOCK.md, "Limits");
- streams stay open for the session's next transfer (GridFTP's cached
  data channels); between transfers a closed stream leaves the cache;
- every stream has its own SocketTuner (DRS per stream, --buffer-budget);
- under PROT P every stream runs TLS, the server as TLS server (ftp/eblock/tls.py).

A stream moves bytes for the transfer its session runs (ftp/eblock/job.py and its
kinds, ftp/eblock/send.py and ftp/eblock/receive.py) and knows that transfer, and its
session, only as the protocols below describe them.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import socket
import ssl
from dataclasses import dataclass
from typing import Any, Protocol

from ....ftp.eblock import MAX_STREAMS, BlockDecoder
from ....io import sockopt
from ....io.tlsbio import reason
from ....io.tuner import SocketTuner
from ....tuning import Role
from ....tuning.budget import BufferBudget
from .tls import StreamTLS

log = logging.getLogger("drsftp.server")
IDLE_BYTES = 64 << 10  # a stream moving less than this between ticks ticks every IDLE_TICK
IDLE_TICK = 0.25  # seconds (the tunings' slowest pace)


@dataclass
class Limits:
    """Bounds a hostile peer cannot pass (docs/EBLOCK.md, "Limits")."""

    per_session: int = MAX_STREAMS  # streams one session may hold open
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


class Control(Protocol):
    """The control connection as the data path sees it (the pyftpdlib handler)."""

    ioloop: Any  # pyftpdlib's IOLoop
    buffer_budget: BufferBudget | None

    def respond(self, resp: str) -> None: ...

    def push(self, data: str) -> None: ...

    def replies_together(self) -> contextlib.AbstractContextManager[None]:
        """Replies made inside go out in one send at its end."""
        ...


class StreamsJob(Protocol):
    """The running transfer as its streams see it (ejob.Job)."""

    @property
    def role(self) -> Role:
        """The server's end: SENDER (RETR, MLSD) or RECEIVER (STOR)."""
        ...

    @property
    def members(self) -> set[Stream]:
        """The streams that carry it."""
        ...

    def pump(self, s: Stream) -> None:
        """A sender's stream ``s`` can take more bytes."""
        ...

    def read(self, s: Stream) -> None:
        """A receiver's stream ``s`` has bytes to read."""
        ...

    def fail(self, reply: str | None) -> None: ...


class Session(Protocol):
    """One control connection's MODE E state as its streams see it
    (esession.ESession)."""

    stream_error: str | None  # a stream's TLS failed between transfers: the next one's reply

    @property
    def h(self) -> Control: ...

    @property
    def limits(self) -> Limits: ...

    @property
    def streams(self) -> list[Stream]: ...

    @property
    def job(self) -> StreamsJob | None: ...

    @property
    def tls_context(self) -> ssl.SSLContext | None: ...

    @property
    def tls_client(self) -> bool: ...

    def new_tuner(self, role: Role, peer: str | None) -> SocketTuner: ...

    def refuse(self, ip: str) -> str | None: ...

    def stream_closed(self, s: Stream) -> None: ...


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

    def __init__(self, session: Session, sock: socket.socket, role: Role) -> None:
        super().__init__(session.h.ioloop, sock)
        self.session = session
        self.role = role
        self.tuner: SocketTuner | None = None
        self.handshake: SocketTuner | None = None  # sized the handshake (outgoing)
        self.decoder = BlockDecoder(max_count=session.limits.max_block)
        self.connecting = False
        self.moved = 0  # bytes moved, for the tuner's rate
        self._tick_handle = None
        self._ticked_at = 0  # moved at the last tick
        self.idle = False  # ticking every IDLE_TICK (_tick): the transfers call bytes_moved()
        # sender state within a transfer
        self.pending = b""  # header bytes not yet sent
        self.pos = self.left = 0  # payload of the current block
        self.eod_queued = self.done = self.retire = False
        self.used = False  # carried a transfer before (125 "reusing")
        self.tls: StreamTLS | None = None  # PROT P: the stream's TLS (ftp/eblock/tls.py)
        self.peer: str | None = None  # the address at the other end, once connected
        # a receiver's bytes read past its EOD: the next transfer's, kept for
        # it (at most one read); the stream reads no more until it starts
        self.held = b""
        self.low_water = 1  # SO_RCVLOWAT as set (1: the kernel's default)
        self.nodelay = False  # TCP_NODELAY set (a sender's first EOD: ftp/eblock/send.py)

    def start(self, static_window: int | None) -> None:
        """Connected: tune it from now on (per-stream DRS)."""
        try:
            self.peer = self.socket.getpeername()[0]
        except OSError:
            self.peer = None
        tuner = self.session.new_tuner(self.role, self.peer)
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
            # a stream that moved less than IDLE_BYTES since its last tick
            # (cached between transfers, or carrying small files) is not
            # limited by its window: it ticks every IDLE_TICK, until
            # bytes_moved() sees it busy again
            self.idle = self.moved - self._ticked_at < IDLE_BYTES
            self._ticked_at = self.moved
            if self.idle:
                delay = max(delay, IDLE_TICK)
            self._tick_handle = self.ioloop.call_later(delay, self._tick, _errback=self.handle_error)

    def bytes_moved(self) -> None:
        """Called by a transfer that moved bytes on an idle stream: past
        IDLE_BYTES since its last tick, it ticks now and at its tuning's
        pace from then on."""
        if self.moved - self._ticked_at >= IDLE_BYTES and self._tick_handle is not None:
            self.idle = False
            self._tick_handle.cancel()
            self._tick_handle = self.ioloop.call_later(0, self._tick, _errback=self.handle_error)

    def secure(self, ctx: ssl.SSLContext | None, client: bool = False) -> None:
        """Under PROT P (``ctx``): TLS with us as server, the client
        speaking first (RFC 4217 sec. 10); as the TLS client under SSCN ON
        (``client``, ftp/tls/sscn.py)."""
        if ctx is not None:
            self.tls = StreamTLS(ctx, self.socket, client)

    def begin_tls(self) -> None:
        """Connected: the TLS client sends its ClientHello now; the server
        waits for it."""
        if self.tls is not None and self.tls.client:
            self._handshake()
        else:
            self.want(self.ioloop.READ)

    def recv_into(self, buf: bytearray) -> int:
        """The stream's data (decrypted under PROT P), as socket.recv_into."""
        if self.tls is None:
            return self.socket.recv_into(buf)
        return self.tls.recv_into(memoryview(buf))

    def batch_reads(self) -> None:
        """After a read: wake the reader at the lesser of the read batch and
        the bytes the sender must still send (decoder.committed), so the
        kernel batches a burst's reads (docs/DESIGN.md#rcvlowat) yet a
        transfer's last block and EOD, below the batch on a stream that stays
        open, wake it at once; 1 after the EOD.  None under TLS: a record's
        bytes are not the blocks' (stream mode batches no TLS reads either)."""
        if self.tls is not None or self.tuner is None or self.closed:
            return
        value = max(1, min(self.tuner.read_batch, self.decoder.committed))
        if value != self.low_water:
            self.low_water = value
            self.tuner.set_low_water(self.socket, value)

    def resume_reading(self, at_once: bool = False) -> None:
        """Read again; bytes it holds from past its last EOD, or data its
        TLS already holds, are read now (its socket may never signal them).
        ``at_once``: a clear-text stream reads what it holds, else what the
        kernel has, right now, not after the next poll (a small file's
        blocks, sent behind its STOR, complete the transfer at once)."""
        self.want(self.ioloop.READ)
        if at_once and self.tls is None:
            try:
                self.handle_read_event()  # (nothing there: the poll's READ)
            except Exception:
                self.handle_error()
        elif self.held or (self.tls is not None and self.tls.established and self.tls.buffered):
            self.ioloop.call_later(0, self.handle_read_event, _errback=self.handle_error)

    def hold(self, rest: memoryview) -> None:
        """``rest`` came after this stream's EOD: the next transfer's blocks
        (GFD.20: EOD ends this transfer's data on the stream, which stays
        cached for the next).  Kept, and no more read until that transfer
        takes the stream (resume_reading): the kernel's receive buffer and
        TCP's flow control hold what follows."""
        self.held = bytes(rest)
        self.want(0)

    def _handshake(self) -> None:
        assert self.tls is not None
        try:
            done = self.tls.handshake_step()
        except (ssl.SSLError, OSError) as exc:
            return self.tls_failed(exc)
        if not done:
            return self.want(self.ioloop.READ | (self.ioloop.WRITE if self.tls.unsent else 0))
        job = self.session.job
        if self._sending_for(job):
            self.want(self.ioloop.WRITE)
        elif self._receiving_for(job):
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

    @property
    def part_done(self) -> bool:
        """Its part of the running transfer is over: EOD sent (a sender's
        stream) or received (a receiver's)."""
        return self.decoder.ended if self.role is Role.RECEIVER else self.done

    def _sending_for(self, job: StreamsJob | None) -> bool:
        """``job`` sends on this stream, and its part is not over."""
        return job is not None and job.role is Role.SENDER and self in job.members and not self.done

    def _receiving_for(self, job: StreamsJob | None) -> bool:
        """What this stream reads belongs to ``job`` (any receiving stream
        may carry a STOR's blocks), until its EOD."""
        return (job is not None and job.role is Role.RECEIVER and self.role is Role.RECEIVER
                and not self.decoder.ended)

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
                return self.begin_tls()  # (as TLS server: the ClientHello comes)
        if self.tls is not None and not self.tls.established:
            try:
                self.tls.flush()
            except OSError as exc:
                return self.tls_failed(exc)
            return self.want(self.ioloop.READ | (self.ioloop.WRITE if self.tls.unsent else 0))
        job = self.session.job
        if job is not None and self._sending_for(job):
            job.pump(self)
        else:
            self.want(self.ioloop.READ)

    def handle_read_event(self) -> None:
        if self.tls is not None and not self.tls.established:
            return self._handshake()
        job = self.session.job
        if job is not None and self._receiving_for(job):
            job.read(self)
            return
        # Between transfers: a closed connection leaves the cache; data
        # for a transfer not yet begun waits in the kernel.  Under TLS a
        # stream we send on is read through (a close_notify is data to
        # the kernel; the receiver has nothing else to say on it).
        tls_sender = self.tls is not None and self.role is Role.SENDER
        peek = self._read_idle_tls() if tls_sender else sockopt.peek_byte(self.socket)
        if peek is None:
            return
        if not peek:
            self.lost("426 Data connection closed by the peer; transfer aborted.")
        elif self._sending_for(job):
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
        member = job is not None and self in job.members and not self.part_done
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


# -- transfers -----------------------------------------------------------------
