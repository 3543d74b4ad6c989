"""A COPY's connections to its remote (docs/HTTP.md, "Third-party copy"):
one stripe per stream, each on a link (links.py: one connection at a
time, kept alive across COPYs) taken from the server's pool when it first
sends and given back when the stripe is done.

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

import ssl
from collections.abc import Callable
from typing import Any

import aiohttp

from ....http import drsheader
from ....tuning import Role
from ..drs import Connection, Settings
from .guard import Guard, Remote
from .links import Link, Links, key_of, report_pairs

REDIRECTS = (301, 302, 303, 307, 308)


class Stripe:
    """One stream of a copy: its link, the bytes it moved."""

    def __init__(self, index: int, role: Role, settings: Settings, guard: Guard, tls: ssl.SSLContext,
                 timeout: float | None, links: Links, cap: int) -> None:
        self.index, self.role, self.settings, self.guard = index, role, settings, guard
        self.tls, self.timeout, self.links, self.cap = tls, timeout, links, cap
        self.moved = 0
        self.drs_peer = False
        self.remote: tuple[str, int] | None = None  # the connection's peer address
        self.link: Link | None = None
        self.done = False  # given back: it moves nothing more
        self.ending = False  # to end after its running range (-P auto gave it back)

    def take_link(self, remote: Remote) -> Link:
        """Its link, taken from the pool the first time (the first request
        makes its connection, unless the pool had one)."""
        if self.link is None:
            self.link = self.links.take(remote, self.guard, self.tls, self.timeout, self.settings)
        return self.link

    def tuned(self) -> Connection | None:
        conn = self.link.tuned() if self.link is not None else None
        if conn is not None and self.link is not None:
            self.remote = self.link.remote
        return conn

    def begin(self) -> None:
        conn = self.tuned()
        if conn is not None:
            conn.begin(self.role)

    def expect(self, n: int) -> None:
        """``n`` bytes asked of the remote (a ranged GET): room for them at once."""
        conn = self.link.conn if self.link is not None else None
        if conn is not None:
            conn.expect(self.role, n)

    def moved_bytes(self, n: int) -> None:
        self.moved += n
        conn = self.link.conn if self.link is not None else None
        if conn is not None:
            conn.moved(self.role, n)

    def end(self) -> None:
        conn = self.link.conn if self.link is not None else None
        if conn is not None:
            conn.end(self.role)

    def drs_value(self) -> str:
        conn = self.link.conn if self.link is not None else None
        tuner = conn.tuner(self.role) if conn is not None else None
        return drsheader.report_value(tuner.report()) if tuner is not None else ""

    def drs_answer(self, headers: Any) -> None:
        """The remote's DRS report, to this connection's tuner."""
        pairs = report_pairs(headers)
        if pairs is None:
            return
        self.drs_peer = True
        conn = self.tuned()
        if self.link is not None:
            self.link.answer(pairs)
        tuner = conn.tuner(self.role) if conn is not None else None
        if tuner is not None and pairs:
            tuner.on_peer_pairs(pairs)

    async def send(self, method: str, remote: Remote, headers: list[tuple[str, str]], what: str,
                   body: Callable[[], Any] | None = None) -> tuple[aiohttp.ClientResponse, Remote]:
        """``method`` to ``remote``, following redirects that guard.py allows."""
        hops = 0
        link = self.take_link(remote)
        while True:
            sent = [*headers, (drsheader.HEADER, self.drs_value())]
            resp = await link.session.request(method, remote.url, headers=sent, allow_redirects=False,
                                              data=body() if body is not None else None)
            link.requests += 1
            self.tuned()
            self.drs_answer(resp.headers)
            location = resp.headers.get("Location")
            if resp.status not in REDIRECTS or not location:
                return resp, remote
            resp.release()
            remote = await self.guard.hop(remote, location, hops, what)
            hops += 1
            if key_of(remote, self.tls, self.timeout) != link.key:
                link.keep = False  # (its connector may now hold another remote's connection)

    def give_back(self) -> None:
        """Done: the link to the pool (kept if its connection is up)."""
        self.done = True
        link, self.link = self.link, None
        if link is not None:
            self.links.give(link, self.cap)

    async def close(self) -> None:
        self.give_back()
