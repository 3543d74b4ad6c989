"""A command's first connection, begun before aiohttp is imported
(decision 0045).

Importing aiohttp and the client's HTTP modules takes a few tenths of a
second of CPU; the TCP handshake of the first connection takes a round
trip of the path.  The command line begins that handshake first (a
non-blocking ``connect``) and the pool's socket factory hands the socket
to aiohttp when it connects to the same address: asyncio's ``sock_connect``
then finds it connecting (``EALREADY``: it waits) or connected (Linux's
``connect`` returns 0).  A refused one reports its error there, as a
fresh socket would.  Nothing here imports aiohttp.
"""

from __future__ import annotations

import contextlib
import logging
import socket

from ...http.url import HTTPLocation
from ...io.tuner import SocketTuner
from ...tuning import Role
from ..transfer.options import TransferOptions

log = logging.getLogger("drsftp.client")


def link_tuner(opts: TransferOptions, role: Role, connections: int, timeline: bool = True) -> SocketTuner:
    """The tuner of one of a pool's connections (pool.py)."""
    # batch_reads off: SO_RCVLOWAT would hold back the tail of a response
    # on a kept-alive connection (no EOF wakes the reader there)
    return SocketTuner(opts.tuning, role, allow_force=opts.force_buffers, parallel=connections > 1,
                       batch_reads=False, timeline=timeline)


class Early:
    """One socket connecting to ``address``, sized before its SYN (the window scale)."""

    def __init__(self, sock: socket.socket, tuner: SocketTuner, address: tuple[str, int]) -> None:
        self.sock: socket.socket | None = sock
        self.tuner, self.address = tuner, address

    def take(self, address: tuple) -> tuple[socket.socket, SocketTuner] | None:
        """The socket and its tuner, once, if it connects to ``address`` (a sockaddr)."""
        if self.sock is None or tuple(address[:2]) != self.address:
            return None
        sock, self.sock = self.sock, None
        return sock, self.tuner

    def close(self) -> None:
        """Not taken: closed."""
        if self.sock is not None:
            self.sock.close()
            self.tuner.close()
            self.sock = None


def begin(loc: HTTPLocation, opts: TransferOptions, role: Role, connections: int) -> Early | None:
    """The first connection to ``loc``'s server, connecting; None where the
    address does not resolve or the socket cannot be made (aiohttp then
    tries, and says why)."""
    try:
        family, kind, proto, _, sockaddr = socket.getaddrinfo(loc.host, loc.port, type=socket.SOCK_STREAM)[0]
        sock = socket.socket(family, kind, proto)
    except OSError as exc:
        log.debug("no early connection to %s: %s", loc.host, exc)
        return None
    tuner = link_tuner(opts, role, connections)
    try:
        tuner.before_handshake(sock)
    except OSError as exc:
        log.info("cannot size the socket before connecting: %s", exc)
    sock.setblocking(False)
    with contextlib.suppress(OSError):  # (EINPROGRESS; a refusal is reported by aiohttp's own connect)
        sock.connect(sockaddr)
    return Early(sock, tuner, (str(sockaddr[0]), int(sockaddr[1])))
