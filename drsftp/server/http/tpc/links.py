"""The server's kept-alive connections to COPY remotes (docs/HTTP.md,
"Third-party copy"): one pool for every COPY, so a tree's files, pulled
one COPY each, reuse warm connections (their congestion window grown,
their TLS done) instead of a new TCP and TLS handshake and slow start per
file.

A :class:`Link` is one aiohttp session of one connection at a time, with
the socket controller (drs.py's Connection) of that connection: the DRS
state stays with the connection it measured, the path's.  Links are kept
per remote: (scheme, host, port, the addresses guard.py checked, the TLS
context, which holds any client credential of this server; a request's
Authorization rides each request, never the connection: RFC 9110 sec.
11.6.2), at most ``cap`` idle a remote (--max-streams), each closed after
IDLE seconds unused; closing it gives its tuners' budget back.  A link
is handed to one stripe at a time, and its resolver answers only from
the addresses checked for the COPY that holds it (guard.PinnedResolver).

A link's socket opens as a third-party data connection does: its path
unknown, taken as a long one, the receiver's cap is offered at the
handshake (reserved in the buffer budget) and the floor locked once
connected, before the first byte (docs/DESIGN.md#open-start,
#third-party-path; decision 0019); from then on the connection's RECEIVER
tuner (drs.py) moves the window, which a raised clamp lifts at once up to
the offer (#kf-clamp-lifts).  A buffer locked small from the start would
ramp at the kernel's per-segment pace (#kf-locked-ramp): a tree's files,
a burst each on a kept link, would take two round trips a MiB.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import ssl
from typing import TYPE_CHECKING, Any

import aiohttp

from ....http import drsheader
from ....tuning import Role
from ..drs import Connection, Settings
from .guard import Guard, PinnedResolver, Remote

if TYPE_CHECKING:
    from ....io.tuner import SocketTuner

log = logging.getLogger("drsftp.server")

IDLE = 30.0  # s an unused link stays open
CONNECT_TIMEOUT = 30.0  # s to connect and complete TLS
USER_AGENT = "drsftp-tpc"

Key = tuple[str, str, int, tuple[str, ...], int, float | None]


class Link:
    """One connection at a time to a remote: its session, socket, tuners."""

    def __init__(self, key: Key, guard: Guard, tls: ssl.SSLContext, timeout: float | None,
                 settings: Settings) -> None:
        self.key, self.settings = key, settings
        self.resolver = PinnedResolver(guard)
        self.sock: socket.socket | None = None
        self.conn: Connection | None = None
        self.remote: tuple[str, int] | None = None  # the connection's peer address
        self.peer: dict[str, int] = {}  # the remote's latest DRS report of this connection
        self.expiry: asyncio.TimerHandle | None = None
        self.requests = 0
        self.fresh = True  # its connection still to be made (not taken from the pool)
        self.handshake: SocketTuner | None = None  # sized the socket's handshake (open start), until connected
        self.keep = True  # False once redirected to another remote: not pooled
        # (happy_eyeballs_delay=None: one address at a time, so ``sock`` is the socket that connected)
        connector = aiohttp.TCPConnector(limit=1, ssl=tls, resolver=self.resolver, socket_factory=self._socket,
                                         use_dns_cache=False, keepalive_timeout=IDLE, happy_eyeballs_delay=None)
        connected = aiohttp.TraceConfig()  # (the floor locked before the first request goes)
        connected.on_connection_create_end.append(self._connected)
        self.session = aiohttp.ClientSession(
            # identity: the bytes stored are the file's (aiohttp asks for gzip by default; pull.py refuses a coding)
            connector=connector, auto_decompress=False, trace_configs=[connected],
            headers={"User-Agent": USER_AGENT, "Accept-Encoding": "identity"},
            timeout=aiohttp.ClientTimeout(total=None, sock_connect=CONNECT_TIMEOUT, sock_read=timeout))

    def _socket(self, addr_info: Any) -> socket.socket:
        family, type_, proto, _, _ = addr_info
        sock = socket.socket(family, type_, proto)
        self.sock = sock
        self._open_start(sock)
        return sock

    def _open_start(self, sock: socket.socket) -> None:
        """The receive buffer offered at the handshake (module docstring)."""
        self._end_handshake()  # (a socket made before this one never connected)
        self.handshake = self.settings.tuner(Role.RECEIVER)
        self.handshake.note_foreign_path()
        self.handshake.before_handshake(sock, reserve_as=self)

    async def _connected(self, *_: Any) -> None:
        """aiohttp made the connection (TCP and TLS), before its first request."""
        self._end_handshake(self.sock)

    def _end_handshake(self, sock: socket.socket | None = None) -> None:
        """Connected (``sock``): the floor locked before the first byte, which
        releases the reservation; else (never connected) just that."""
        tuner, self.handshake = self.handshake, None
        if tuner is None:
            return
        if sock is not None:
            tuner.after_handshake(sock, reserved_as=self)
        elif self.settings.budget is not None:
            self.settings.budget.release(self)

    @property
    def open(self) -> bool:
        """Its connection is still up (a body cut short closes it: aiohttp)."""
        sock = self.sock
        return sock is not None and sock.fileno() >= 0 and not self.session.closed

    def tuned(self) -> Connection | None:
        """The controller of the connection now in use (a new one after the
        remote closed the last)."""
        sock = self.sock
        if sock is None:
            return None
        if self.conn is None or self.conn.sock is not sock:
            if self.conn is not None:
                self.conn.close()
            try:
                peer = sock.getpeername()
            except OSError:
                return None
            self.remote = (str(peer[0]), int(peer[1]))
            self.peer = {}
            self.conn = Connection(sock, self.settings, str(peer[0]))
        return self.conn

    def answer(self, pairs: dict[str, int]) -> None:
        self.peer = dict(pairs)

    async def close(self) -> None:
        self._end_handshake()
        if self.expiry is not None:
            self.expiry.cancel()
            self.expiry = None
        if self.conn is not None:
            self.conn.close()
            self.conn = None
        with contextlib.suppress(Exception):
            await self.session.close()


def key_of(remote: Remote, tls: ssl.SSLContext, timeout: float | None) -> Key:
    return (remote.scheme, remote.host.lower(), remote.port, remote.addresses, id(tls), timeout)


class Links:
    """Idle links by remote; taken by a stripe, given back when it is done."""

    def __init__(self, idle: float = IDLE) -> None:
        self.idle_for = idle
        self.idle: dict[Key, list[Link]] = {}
        self.made = 0  # links opened (for the log and the tests' figures)
        self.reused = 0
        self.taken: dict[Key, int] = {}  # links handed out and not given back, by remote
        self._closing: set[asyncio.Task[None]] = set()

    def take(self, remote: Remote, guard: Guard, tls: ssl.SSLContext, timeout: float | None,
             settings: Settings) -> Link:
        key = key_of(remote, tls, timeout)
        self.taken[key] = self.taken.get(key, 0) + 1
        kept = self.idle.get(key, [])
        while kept:
            link = kept.pop()  # the last given back: the warmest
            if link.expiry is not None:
                link.expiry.cancel()
                link.expiry = None
            if link.open:
                link.resolver.guard = guard
                link.fresh = False
                self.reused += 1
                return link
            self._close(link)
        self.made += 1
        return Link(key, guard, tls, timeout, settings)

    def give(self, link: Link, cap: int) -> None:
        """``link`` is free again: kept if its connection is up and the
        remote has fewer than ``cap`` idle, else closed."""
        left = self.taken.get(link.key, 0) - 1
        if left > 0:
            self.taken[link.key] = left
        else:
            self.taken.pop(link.key, None)
        kept = self.idle.setdefault(link.key, [])
        if not link.keep or not link.open or len(kept) >= max(cap, 0):
            self._close(link)
            if not kept:
                self.idle.pop(link.key, None)
            return
        kept.append(link)
        link.expiry = asyncio.get_running_loop().call_later(self.idle_for, self._expire, link)

    def _expire(self, link: Link) -> None:
        kept = self.idle.get(link.key, [])
        if link in kept:
            kept.remove(link)
            if not kept:
                self.idle.pop(link.key, None)
        link.expiry = None
        self._close(link)

    def _close(self, link: Link) -> None:
        task = asyncio.ensure_future(link.close())
        self._closing.add(task)
        task.add_done_callback(self._closing.discard)

    async def close(self) -> None:
        """The server stops: every link closed."""
        links = [link for kept in self.idle.values() for link in kept]
        self.idle.clear()
        for link in links:
            await link.close()
        if self._closing:
            await asyncio.gather(*self._closing, return_exceptions=True)


def report_pairs(headers: Any) -> dict[str, int] | None:
    """A remote's DRS report (http/drsheader.py): None without one."""
    try:
        return drsheader.parse_report(headers.get(drsheader.HEADER))
    except drsheader.DRSArgumentError as exc:
        log.info("http: a COPY's remote sent a malformed DRS header: %s", exc)
        return None
