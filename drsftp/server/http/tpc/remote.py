"""A COPY's connections to its remote (docs/HTTP.md, "Third-party copy"):
one aiohttp client session per stripe, each holding one connection at a
time, in the front's loop.

Each connection's socket gets the front's socket controller (drs.py) as
soon as it is connected: RECEIVER for a pull, SENDER for a push, right-
sized from its own TCP_INFO like any connection of the front.  Every
request carries a ``DRS`` header with that tuner's latest report (empty
before the first), and a ``DRS`` header in the answer (a drsftp peer's
report of the same connection, http/drsheader.py) is fed back to it: two
drsftp servers exchange their measurements in band, with no client on the
path.  Connections go only to the addresses guard.py checked.
"""

from __future__ import annotations

import logging
import socket
import ssl
from collections.abc import Callable
from typing import Any

import aiohttp

from ....http import drsheader
from ....tuning import Role
from ..drs import Connection, Settings
from .guard import Guard, PinnedResolver, Remote

log = logging.getLogger("drsftp.server")

REDIRECTS = (301, 302, 303, 307, 308)
CONNECT_TIMEOUT = 30.0  # s to connect and complete TLS
USER_AGENT = "drsftp-tpc"


class Stripe:
    """One stream of a copy: its session, the connection's tuner, the bytes it moved."""

    def __init__(self, index: int, role: Role, settings: Settings, guard: Guard, tls: ssl.SSLContext,
                 timeout: float | None) -> None:
        self.index, self.role, self.settings, self.guard = index, role, settings, guard
        self.moved = 0
        self.drs_peer = False
        self.remote: tuple[str, int] | None = None  # the connection's peer address
        self._sock: socket.socket | None = None
        self._conn: Connection | None = None
        connector = aiohttp.TCPConnector(limit=1, ssl=tls, resolver=PinnedResolver(guard),
                                         socket_factory=self._socket, use_dns_cache=False)
        self.session = aiohttp.ClientSession(
            connector=connector, auto_decompress=False, headers={"User-Agent": USER_AGENT},
            timeout=aiohttp.ClientTimeout(total=None, sock_connect=CONNECT_TIMEOUT, sock_read=timeout))

    def _socket(self, addr_info: Any) -> socket.socket:
        family, type_, proto, _, _ = addr_info
        sock = socket.socket(family, type_, proto)
        self._sock = sock
        return sock

    def tuned(self) -> Connection | None:
        """The controller of the connection the stripe now uses (a new one
        after the remote closed the last)."""
        sock = self._sock
        if sock is None:
            return None
        if self._conn is None or self._conn.sock is not sock:
            if self._conn is not None:
                self._conn.close()
            try:
                peer = sock.getpeername()
            except OSError:
                return None
            self.remote = (str(peer[0]), int(peer[1]))
            self._conn = Connection(sock, self.settings, str(peer[0]))
        return self._conn

    def begin(self) -> None:
        conn = self.tuned()
        if conn is not None:
            conn.begin(self.role)

    def moved_bytes(self, n: int) -> None:
        self.moved += n
        if self._conn is not None:
            self._conn.moved(self.role, n)

    def end(self) -> None:
        if self._conn is not None:
            self._conn.end(self.role)

    def drs_value(self) -> str:
        tuner = self._conn.tuner(self.role) if self._conn is not None else None
        return drsheader.report_value(tuner.report()) if tuner is not None else ""

    def drs_answer(self, headers: Any) -> None:
        """The remote's DRS report, to this connection's tuner."""
        try:
            pairs = drsheader.parse_report(headers.get(drsheader.HEADER))
        except drsheader.DRSArgumentError as exc:
            log.info("http: a COPY's remote sent a malformed DRS header: %s", exc)
            return
        if pairs is None:
            return
        self.drs_peer = True
        conn = self.tuned()
        tuner = conn.tuner(self.role) if conn is not None else None
        if tuner is not None and pairs:
            tuner.on_peer_pairs(pairs)

    async def send(self, method: str, remote: Remote, headers: list[tuple[str, str]], what: str,
                   body: Callable[[], Any] | None = None) -> tuple[aiohttp.ClientResponse, Remote]:
        """``method`` to ``remote``, following redirects that guard.py allows."""
        hops = 0
        while True:
            sent = [*headers, (drsheader.HEADER, self.drs_value())]
            resp = await self.session.request(method, remote.url, headers=sent, allow_redirects=False,
                                              data=body() if body is not None else None)
            self.tuned()
            self.drs_answer(resp.headers)
            location = resp.headers.get("Location")
            if resp.status not in REDIRECTS or not location:
                return resp, remote
            resp.release()
            remote = await self.guard.hop(remote, location, hops, what)
            hops += 1

    async def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None
        await self.session.close()
