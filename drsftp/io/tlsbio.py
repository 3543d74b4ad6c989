"""TLS without a socket: ``ssl.SSLObject`` over two memory buffers.

The MODE E data paths move their own bytes (pyftpdlib's ioloop on the
server, sending threads and asyncio on the client); under PROT P each
stream runs its TLS through a :class:`TLSPipe` (docs/EBLOCK.md, "TLS on
the streams"): the driver feeds it the ciphertext it read and sends the
ciphertext it hands out; the pipe only encrypts and decrypts.
"""

from __future__ import annotations

import ssl


class TLSPipe:
    """One TLS connection's state between the socket and the data."""

    def __init__(self, ctx: ssl.SSLContext, *, server_side: bool, server_hostname: str | None = None) -> None:
        self.incoming, self.outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
        # (a client context of drsftp's offers the control connection's
        # session here: drsftp.client.session.tls._ReusingContext)
        self.obj = ctx.wrap_bio(self.incoming, self.outgoing, server_side=server_side,
                                server_hostname=server_hostname)
        self.established = False

    def handshake(self) -> bool:
        """Advance the handshake with what was fed: True once it is done.
        The bytes to send are in :meth:`take`; ssl.SSLError if it failed."""
        if not self.established:
            try:
                self.obj.do_handshake()
            except ssl.SSLWantReadError:
                return False
            self.established = True
        return True

    def feed(self, data: bytes | memoryview) -> None:
        """Ciphertext read from the peer."""
        self.incoming.write(data)

    def take(self) -> bytes:
        """Ciphertext to send to the peer."""
        return self.outgoing.read()

    @property
    def buffered(self) -> int:
        """Ciphertext fed and not yet decrypted (a record's first part)."""
        return self.incoming.pending

    def encrypt(self, data: bytes | memoryview) -> bytes:
        """``data`` as TLS records (a memory BIO never refuses a write)."""
        self.obj.write(data)
        return self.outgoing.read()

    def read_into(self, view: memoryview) -> int:
        """Plaintext into ``view``: its count, 0 when a whole record is not
        there yet.  EOFError at the peer's close_notify."""
        n = 0
        while n < len(view):
            try:
                k = int(self.obj.read(len(view) - n, view[n:]))  # into the buffer: a count
            except ssl.SSLWantReadError:
                break
            except ssl.SSLZeroReturnError:
                k = 0
            if not k:  # (the ssl module reads a close_notify as 0 bytes)
                if n:
                    break
                raise EOFError("the peer ended TLS (close_notify)")
            n += k
        return n


def reason(exc: BaseException) -> str:
    """What a TLS failure says, in a few words."""
    return str(getattr(exc, "reason", None) or getattr(exc, "verify_message", None) or exc
               or type(exc).__name__)
