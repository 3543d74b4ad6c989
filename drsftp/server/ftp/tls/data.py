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

A data connection is open from its accept or connect, handshaking or
not: the transfer command waits for it.  A handshake that fails before
its transfer command came keeps its 522 for that command (pyftpdlib sent
it at once, where the client took it for its next command's reply, and
the transfer command then got "none is open": ftp/stream/finalreply.py).
Bytes that come before the transfer command do not close the channel
(pyftpdlib's DTPHandler.readable takes any as its peer gone): the TLS
server's session tickets to this end as the TLS client (SSCN ON) are
taken, a third-party source's first bytes wait for the STOR.
"""

from __future__ import annotations

import logging
import socket
import sys

from pyftpdlib.handlers import DTPHandler
from pyftpdlib.utils import is_ssl_sock

from .. import compat
from ..stream.channel import LOST_ERRNOS

log = logging.getLogger("drsftp.server")


def tls_reason(exc: BaseException | None) -> str:
    """What a pyOpenSSL failure says, in a few words: OpenSSL's last
    reason ("no shared cipher"), or the system error ("Unexpected EOF")."""
    args: tuple = getattr(exc, "args", ())
    if args and isinstance(args[0], list) and args[0] and isinstance(args[0][-1], tuple):
        text = str(args[0][-1][-1])
    elif len(args) == 2 and isinstance(args[1], str):
        text = args[1]
    else:
        text = str(exc or "") or type(exc).__name__
    return " ".join(text.split()) or "unknown reason"


class TLSDataReplies:
    """Put in front of the TLS data channel class."""

    _handshake_answered = False

    def handle_failed_ssl_handshake(self):
        self._handshake_failed(sys.exc_info()[1])
        self.close()  # type: ignore[attr-defined]

    def close(self):
        """pyftpdlib closes a channel whose peer reset it or closed it
        mid-handshake (a SysCallError) without any reply."""
        from OpenSSL import SSL

        exc = sys.exc_info()[1]
        if isinstance(exc, SSL.Error) and compat.tls_handshaking(self) and not compat.closed(self):
            self._handshake_failed(exc)
        super().close()  # type: ignore[misc]

    def _handshake_failed(self, exc: BaseException | None) -> None:
        """RFC 4217 sec. 10.2: 522 when the data connection's TLS
        negotiation fails, naming OpenSSL's reason, to the transfer command
        waiting for this connection, or else the next one."""
        if self._handshake_answered:
            return
        self._handshake_answered = True
        why = tls_reason(exc)
        log.info("TLS handshake on the data connection from %s failed: %r", self.data_peer, exc)  # type: ignore[attr-defined]
        reply = f"522 SSL handshake failed on the data connection: {why}."
        ch = self.cmd_channel  # type: ignore[attr-defined]
        if compat.transfer_attached(self):
            compat.set_final_reply(self, reply, log.info)
        else:
            compat.set_final_reply(self, None)
            if not ch.fail_queued_transfer(reply):
                ch.data_path_failed(reply)

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
    came (a client that ended its upload with a FIN alone got no 226).

    Reads past the mixin (the handshake done, or PROT C) before the
    transfer command come here too, and do not close the channel."""

    def readable(self):
        # past the TLS mixin's own (a handshake or shutdown step waiting to read)
        if not compat.transfer_attached(self) and not compat.closed(self):
            return True  # pyftpdlib's would close the channel
        return super().readable()

    def handle_read_event(self):
        """The whole class's handle_read, DRSDataMixin's read before the
        transfer under PROT C with it (pyftpdlib's DTPHandler makes its
        own the read event's)."""
        if is_ssl_sock(self.socket) and not compat.transfer_attached(self):
            self._tls_read_before_transfer()
        else:
            self.handle_read()

    def _tls_read_before_transfer(self) -> None:
        """A peek reads the records: a session ticket is taken, data stays
        (in OpenSSL) for the transfer command, which reads it first
        (enable_receiving); a close or a reset ends the channel."""
        from OpenSSL import SSL

        try:
            data = self.socket.recv(1, socket.MSG_PEEK)
        except (SSL.WantReadError, SSL.WantWriteError):
            return  # a ticket taken, or a record not whole yet
        except SSL.ZeroReturnError:
            data = b""
        except (SSL.Error, OSError) as exc:
            log.info("data connection from %s lost before its transfer command: %r",
                     self.data_peer, exc)  # type: ignore[attr-defined]
            compat.skip_tls_goodbye(self)
            data = b""
        if data:
            compat.stop_reading(self)
        else:
            self.handle_close()  # no command to answer (DRSDataMixin)

    def enable_receiving(self, type, cmd):
        super().enable_receiving(type, cmd)
        if is_ssl_sock(self.socket) and self.socket.pending():  # read before the command: no read event for it
            self.call_later(0, self._read_held)

    def _read_held(self) -> None:
        if not compat.closed(self):
            self.handle_read_event()

    def handle_close(self):
        from OpenSSL import SSL

        if isinstance(sys.exc_info()[1], SSL.SysCallError):
            compat.skip_tls_goodbye(self)
        if self.closed_by_loss():  # type: ignore[attr-defined]
            return
        super().handle_close()
