"""SSCN: which end of a PROT P data connection is the TLS client
(docs/PROTOCOL.md, "SSCN").

RFC 4217 sec. 10 makes the FTP server the TLS server on its data
connections, so in a third-party transfer between two FTPS servers both
would wait for a ClientHello.  SSCN, the de-facto extension lftp and
Serv-U use for FXP over TLS, lets the client ask one of them to take the
TLS client's role: ``SSCN ON`` -> ``200 SSCN:CLIENT METHOD``,
``SSCN OFF`` -> ``200 SSCN:SERVER METHOD``, ``SSCN`` alone says which is
in force.  It holds for the session's data connections from the next one
on, stream mode and MODE E; REIN and a new USER end it.  FEAT lists SSCN
where TLS is configured (the TLS handler classes only).  The TLS client
end does not check the other server's certificate: the client checked
both on their control connections (docs/SECURITY.md).
"""

from __future__ import annotations

import logging

from .. import compat

log = logging.getLogger("drsftp.server")

SSCN_COMMAND = {
    "perm": None,
    "auth": True,
    "arg": None,
    "help": "Syntax: SSCN [<SP> ON | OFF] (TLS client role on data connections, for server-to-server copies).",
}


class SSCNCommand:
    """Mixed into the TLS control handler (handler.tls_handler_class)."""

    def __init__(self, conn, server, ioloop=None):
        super().__init__(conn, server, ioloop)
        self.sscn_client = False
        compat.extra_features(self).append("SSCN")

    def ftp_SSCN(self, line):
        arg = (line or "").strip().upper()
        if arg in ("ON", "OFF"):
            self.sscn_client = arg == "ON"
        elif arg:
            self.respond("501 SSCN takes ON or OFF.")  # type: ignore[attr-defined]
            return
        self.respond("200 SSCN:CLIENT METHOD" if self.sscn_client else "200 SSCN:SERVER METHOD")  # type: ignore[attr-defined]

    def flush_account(self):
        super().flush_account()  # type: ignore[misc]
        self.sscn_client = False


class SSCNData:
    """Mixed into the TLS data channel class: under SSCN ON the channel
    takes the TLS client's role and sends its ClientHello on the ioloop's
    next turn (the other server, the TLS server, waits for it).  Not in
    the channel's ``__init__``: pyftpdlib makes a PASV connection the
    session's data channel only if it is still open when ``__init__``
    returns, and a PORT connection whatever it is, so a handshake that
    failed there left no data connection, or a closed one, and no reply
    to the transfer command; on the ioloop a failure reaches the transfer
    command (tls/data.py)."""

    _tls_client = False
    MAX_DRAIN = 64  # records read at close, at most

    def secure_connection(self, ssl_context):
        ch = self.cmd_channel  # type: ignore[attr-defined]
        if not getattr(ch, "sscn_client", False):
            return super().secure_connection(ssl_context)  # type: ignore[misc]
        self._tls_client = True
        super().secure_connection(ch.ssl_client_context)  # type: ignore[misc]
        if not compat.closed(self):
            compat.start_tls_as_client(self)
            self.call_later(0, compat.step_tls_handshake, self)  # type: ignore[attr-defined]
        return None

    def close(self):
        """A TLS 1.3 server sends its session tickets after the handshake;
        a sending client never reads them, and closing a socket with unread
        bytes resets the connection (RFC 9293 sec. 3.6), which drops what
        the receiver had not read yet: read them first."""
        if self._tls_client and compat.tls_established(self) and not compat.closed(self):
            from OpenSSL import SSL

            for _ in range(self.MAX_DRAIN):
                try:
                    if not self.socket.recv(1 << 16):  # type: ignore[attr-defined]
                        break
                except (SSL.Error, OSError):  # WantReadError: nothing more is there
                    break
        super().close()  # type: ignore[misc]
