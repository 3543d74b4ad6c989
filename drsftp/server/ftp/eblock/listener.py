"""The PASV/EPSV listener of MODE E in ``drsftp serve``: it accepts the
sender's streams (docs/EBLOCK.md, "Data connections"; streams.py)."""

from __future__ import annotations

import logging
import socket

from ....tuning import Role
from .streams import Session, Stream, _Channel

log = logging.getLogger("drsftp.server")


class Listener(_Channel):
    """PASV/EPSV in MODE E: accepts the sender's streams, from the control
    connection's address or a listed third-party peer's (thirdparty.py),
    within the session's and the server's limits (others are closed at
    once)."""

    def __init__(self, session: Session, sock: socket.socket) -> None:
        super().__init__(session.h.ioloop, sock)
        self.session = session
        self.handshake = session.new_tuner(Role.RECEIVER, None)  # whoever connects: known at accept
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
        stream.secure(s.tls_context, s.tls_client)
        stream.start(self.handshake.static_window)
        stream.begin_tls()

    def close(self) -> None:
        if not self.closed and self.session.h.buffer_budget is not None:
            self.session.h.buffer_budget.release(self)
        super().close()
