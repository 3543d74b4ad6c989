"""Stream-mode data channels under PROT P: how their TLS ends.

Replies for a TLS that fails.  pyftpdlib answers a data handshake that
fails in its own handshake step with 522 (RFC 4217 sec. 10.2: the data
connection's TLS negotiation failed), but when a RETR starts on a
connection whose ClientHello has already arrived, its first send runs the
handshake, and an OpenSSL error there (no shared cipher, a refused
certificate) reaches the TLS mixin's ``handle_error``, which closes the
channel without any reply: the client waits for a final reply that never
comes.  A TLS error after the handshake likewise ended the transfer
unanswered; it gets 426 (RFC 959 sec. 4.2: connection closed, transfer
aborted).

A reset is not an end.  pyftpdlib's TLS mixin takes a reset data
connection (pyOpenSSL's SysCallError with ECONNRESET) as the end of an
upload, as a close_notify is: 226, and the file kept as whole.  A client
resets when its socket is closed with unread bytes, or bytes arrive after
it closed (RFC 9293 sec. 3.6), and its kernel then drops what it had not
yet sent.  Under TLS 1.3 a server sends its session ticket after the
handshake (RFC 8446 sec. 4.6.1); a client that sent its file and closed
before the ticket came (lftp, whose writes all fit its socket buffer) or
never reads it resets, and the tail of its upload is lost.  OpenSSL sends
the ticket on every handshake and pyOpenSSL has no way to stop it
(SSL_set_num_tickets), so the reset cannot always be prevented: it is
answered 426 and the upload stays under its temporary name
(datachannel.DRSDataMixin.connection_lost); a client retries.  The end of
an upload is the client's close_notify (RFC 8446 sec. 6.1), or its TCP
FIN without one (every byte before a FIN came).
"""

from __future__ import annotations

import logging
import sys

from pyftpdlib.handlers import DTPHandler

from .. import compat
from ..stream.channel import LOST_ERRNOS

log = logging.getLogger("drsftp.server")


class TLSDataReplies:
    """Put in front of the TLS data channel class."""

    def handle_error(self):
        from OpenSSL import SSL

        if isinstance(sys.exc_info()[1], SSL.Error):
            if not compat.tls_established(self):
                self.handle_failed_ssl_handshake()  # 522, and closed
                return
            compat.set_final_reply(self, "426 TLS error on the data connection; transfer aborted.", log.warning)
        super().handle_error()

    def lost_errno(self):
        """pyOpenSSL reports a reset as SysCallError(errno, text)."""
        from OpenSSL import SSL

        exc = sys.exc_info()[1]
        if isinstance(exc, SSL.SysCallError) and exc.args and exc.args[0] in LOST_ERRNOS:
            return exc.args[0]
        return super().lost_errno()


class TLSDataEnd(DTPHandler):
    """Put after the TLS data channel class (pyftpdlib's TLS_DTPHandler),
    so that its MRO has it between pyftpdlib's TLS mixin and DTPHandler:
    the mixin calls DTPHandler's handle_close itself for a reset, a TCP
    end without close_notify and a close_notify, past drsftp's
    handle_close; this one ends a reset transfer as aborted
    (DRSDataMixin.closed_by_loss).  After a reset or a TCP end the channel
    closes without a TLS shutdown of its own: pyOpenSSL's fails there,
    pyftpdlib's close took the failure for a retry, and no final reply
    came (a client that ended its upload with a FIN alone got no 226)."""

    def handle_close(self):
        from OpenSSL import SSL

        if isinstance(sys.exc_info()[1], SSL.SysCallError):
            compat.skip_tls_goodbye(self)
        if self.closed_by_loss():  # type: ignore[attr-defined]
            return
        super().handle_close()
