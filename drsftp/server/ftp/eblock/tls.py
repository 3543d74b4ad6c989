"""TLS on ``drsftp serve``'s MODE E streams under PROT P (RFC 4217;
docs/EBLOCK.md, "TLS on the streams").

The server is the TLS server on every stream, whichever side connected
(RFC 4217 sec. 10: the FTP server takes the server role on data
connections; after PORT it connects, then waits for the ClientHello),
unless SSCN ON made it the TLS client (ftp/tls/sscn.py): then it sends the
ClientHello as soon as the stream is connected.
Each stream is one TLS connection with its own handshake, kept with the
stream across transfers while it stays cached.  The streams' context is
the standard library's, from the certificate and key the control
connection uses (pyftpdlib's is pyOpenSSL's): a client's offer of its
control connection's session is therefore answered with a full
handshake.  The MODE E framing (EOD count, EOF) runs inside TLS, so a
truncated stream shows as a missing EOD, not as a short file; a stream
ends without close_notify like its TCP close ends it in clear text.
"""

from __future__ import annotations

import contextlib
import socket
import ssl

from ....io import tlspolicy
from ....io.tlsbio import TLSPipe

RAW_CHUNK = 1 << 20  # ciphertext read per recv


def server_context(certfile: str, keyfile: str | None) -> ssl.SSLContext:
    """The streams' TLS context: drsftp's policy (drsftp.io.tlspolicy), no
    renegotiation, no session tickets (each stream is one long connection)."""
    ctx = tlspolicy.apply(ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER))
    ctx.options |= ssl.OP_NO_RENEGOTIATION
    ctx.num_tickets = 0
    ctx.load_cert_chain(certfile, keyfile or certfile)
    return ctx


def client_context() -> ssl.SSLContext:
    """The streams' context in the TLS client's role (SSCN ON: a
    third-party transfer between two FTPS servers, docs/PROTOCOL.md
    "SSCN"): drsftp's policy; the peer, another server the client chose,
    is not checked (the client checked both on their control
    connections)."""
    ctx = tlspolicy.apply(ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT))
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    return ctx


class StreamTLS:
    """A stream's TLS on its non-blocking socket, the server's end (the
    client's under SSCN ON: ``client``).  Writes queue ciphertext;
    :meth:`flush` sends it as the socket takes it."""

    def __init__(self, ctx: ssl.SSLContext, sock: socket.socket, client: bool = False) -> None:
        self.client = client
        self.pipe = TLSPipe(ctx, server_side=not client)
        self.sock = sock
        self.out = b""  # ciphertext not yet sent, from self.sent on
        self.sent = 0
        self.raw = bytearray(RAW_CHUNK)

    @property
    def established(self) -> bool:
        return self.pipe.established

    @property
    def unsent(self) -> bool:
        return self.sent < len(self.out)

    @property
    def buffered(self) -> bool:
        """Ciphertext already read waits in the pipe (no read event will
        come for it)."""
        return self.pipe.buffered > 0

    def handshake_step(self) -> bool:
        """Read what came and advance the handshake: True once done.
        ssl.SSLError on a failed one, ConnectionError if the peer left."""
        try:
            k = self.sock.recv_into(self.raw)
        except (BlockingIOError, InterruptedError):
            k = -1
        if k == 0:
            raise ConnectionResetError("the peer closed the connection during the TLS handshake")
        if k > 0:
            self.pipe.feed(memoryview(self.raw)[:k])
        try:
            done = self.pipe.handshake()
        except ssl.SSLError:
            self._queue(self.pipe.take())  # the fatal alert that says why (RFC 8446 sec. 6.2)
            with contextlib.suppress(OSError):
                self.flush()
            raise
        self._queue(self.pipe.take())
        self.flush()
        return done

    def send(self, data: bytes | memoryview) -> None:
        """Queue ``data``, encrypted."""
        self._queue(self.pipe.encrypt(data))

    def _queue(self, cipher: bytes) -> None:
        if not cipher:
            return
        self.out = (self.out[self.sent:] + cipher) if self.unsent else cipher
        self.sent = 0

    def flush(self) -> bool:
        """Send what is queued: True once all of it went.  OSError (other
        than would-block) if the connection failed."""
        view = memoryview(self.out)
        while self.sent < len(self.out):
            try:
                self.sent += self.sock.send(view[self.sent:])
            except (BlockingIOError, InterruptedError):
                return False
        return True

    def recv_into(self, buf: memoryview) -> int:
        """Plaintext into ``buf``, as socket.recv_into: BlockingIOError
        when none is there yet, 0 when the peer closed.  At most
        ``len(buf)`` bytes of ciphertext are held, so one call takes
        every whole record read (none waits for a read event that would
        not come)."""
        try:
            n = self.pipe.read_into(buf)
        except EOFError:
            return 0
        if n:
            return n
        room = min(len(buf) - self.pipe.buffered, len(self.raw))
        if room > 0:
            k = self.sock.recv_into(self.raw, room)  # BlockingIOError: nothing there
            if k == 0:
                return 0
            self.pipe.feed(memoryview(self.raw)[:k])
        try:
            n = self.pipe.read_into(buf)
        except EOFError:
            return 0
        if not n:
            raise BlockingIOError
        return n
