"""Final replies for stream-mode data channels under PROT P whose TLS fails.

pyftpdlib answers a data handshake that fails in its own handshake step
with 522 (RFC 4217 sec. 10.2: the data connection's TLS negotiation
failed), but when a RETR starts on a connection whose ClientHello has
already arrived, its first send runs the handshake, and an OpenSSL error
there (no shared cipher, a refused certificate) reaches the TLS mixin's
``handle_error``, which closes the channel without any reply: the client
waits for a final reply that never comes.  A TLS error after the
handshake likewise ended the transfer unanswered; it gets 426 (RFC 959
sec. 4.2: connection closed, transfer aborted).
"""

from __future__ import annotations

import logging
import sys

from .. import compat

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
