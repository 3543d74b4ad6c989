"""One aiohttp session for a command, and DRS on each of its connections.

``TCPConnector(limit=N)`` holds the connections; every socket it opens gets
a :class:`~drsftp.io.tuner.SocketTuner` (receiver for a get, sender for a
put: docs/DESIGN.md, "Socket controller"): set before the handshake (the
window scale), attached once connected, ticked by the bytes that move on
it, closed at the end.  Each request carries its connection's latest
report in a ``DRS`` header and the server's ``DRS`` answer feeds that
connection's controller (docs/HTTP.md, "DRS"; drsftp/http/drsheader.py).

Which connection a request travels on is known only once the connector
hands it out: the connector here notes it in the request's :class:`Slot`
(a context variable the request's task set) and adds the header then,
and the headers the slot's ``ready`` makes: a request can be opened
before it is known what it asks (a ranged GET's range: client/http/fetch.py).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import contextvars
import logging
import socket
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine
from typing import Any

import aiohttp

from ...http import drsheader, spans
from ...http.url import HTTPLocation
from ...io import sockopt
from ...io.handshake import handshake_rtt
from ...io.tuner import SocketTuner
from ...tuning import Role, check_spec
from ..result import TransferResult
from ..transfer import maxtime
from ..transfer.options import TransferOptions
from .errors import HTTPError, connection_error, status_error
from .preconnect import Early, link_tuner

log = logging.getLogger("drsftp.client")
TICK = 0.1  # seconds between a connection's ticks when the tuner names none
READ_BUFFER = 1 << 20  # bytes a response buffers before reading pauses (aiohttp: 64 KiB)


class Link:
    """One connection's tuner, ticked by the bytes moved on it."""

    def __init__(self, tuner: SocketTuner, sock: socket.socket | None = None) -> None:
        self.tuner, self.sock = tuner, sock
        self._pending = 0
        self._next = 0.0

    def moved(self, nbytes: int) -> None:
        self._pending += nbytes
        now = time.monotonic()
        if now >= self._next:
            wait = self.tuner.tick(self._pending)
            self._pending, self._next = 0, now + (wait or TICK)


class Slot:
    """The connection one request got (set by the connector)."""

    link: Link | None = None
    # awaited once connected, its headers added (raising ends the request, the connection kept)
    ready: Callable[[Slot], Awaitable[dict[str, str]]] | None = None


_SLOT: contextvars.ContextVar[Slot | None] = contextvars.ContextVar("drsftp_http_slot", default=None)


class _Connector(aiohttp.TCPConnector):
    def __init__(self, pool: Pool, **kw: Any) -> None:
        super().__init__(socket_factory=pool.new_socket, **kw)
        self._pool = pool

    async def connect(self, req, traces, timeout):  # type: ignore[no-untyped-def]
        conn = await super().connect(req, traces, timeout)
        link = self._pool.link_of(conn.transport)
        slot = _SLOT.get()
        if slot is not None:
            slot.link = link
            if slot.ready is not None:
                try:
                    req.headers.update(await slot.ready(slot))
                except BaseException:
                    conn.release()
                    raise
        if link is not None and self._pool.speak_drs:
            req.headers[drsheader.HEADER] = drsheader.report_value(link.tuner.report())
        return conn


class Pool:
    """``async with Pool(loc, opts, role, connections) as pool``."""

    def __init__(self, loc: HTTPLocation, opts: TransferOptions, role: Role, connections: int = 1,
                 timeline: bool = True, early: Early | None = None) -> None:
        self.loc, self.opts, self.role = loc, opts, role
        self.timeline = timeline  # False: no tuner keeps one (a tree's connections; no record carries it)
        self.speak_drs = opts.use_drs_command
        self.connections = max(1, connections)
        self.links: dict[object, Link] = {}  # the transport -> its connection's tuner
        self._fresh: dict[int, SocketTuner] = {}  # a socket's fd -> its tuner, until connected
        self.drs_replies = 0
        self.server_last: dict[str, int] = {}
        self._first_sock: socket.socket | None = None  # the first socket opened, for handshake_rtt
        self.session: aiohttp.ClientSession | None = None
        self.early = early  # the first connection, begun before aiohttp's import (preconnect.py)

    async def __aenter__(self) -> Pool:
        ssl_arg: Any = False
        if self.loc.scheme == "https":
            from ..session.tls import client_tls

            ssl_arg = client_tls(self.opts.ca_file, self.opts.insecure).context
            if self.opts.insecure:
                log.warning("--insecure: the server's TLS certificate is not checked")
        # identity: a body is the file's bytes, never a content coding of them (RFC 9110 sec. 12.5.3)
        headers = {"User-Agent": "drsftp", "Accept-Encoding": "identity"}
        if self.loc.user:  # HTTP Basic (RFC 7617 sec. 2): user-id ":" password, UTF-8, base64
            pair = f"{self.loc.user}:{self.loc.password or ''}".encode()
            headers["Authorization"] = "Basic " + base64.b64encode(pair).decode("ascii")
        timeout = aiohttp.ClientTimeout(total=None, connect=self.opts.connect_timeout,
                                        sock_read=self.opts.idle_timeout)
        connector = _Connector(self, limit=self.connections, ssl=ssl_arg)
        self.session = aiohttp.ClientSession(connector=connector, timeout=timeout, auto_decompress=False,
                                             read_bufsize=READ_BUFFER,
                                             headers=headers)
        return self

    async def __aexit__(self, *exc: object) -> None:
        for link in self.links.values():
            link.tuner.close()
            link.tuner.release()
        for tuner in self._fresh.values():
            tuner.close()
        if self.early is not None:
            self.early.close()
        if self.session is not None:
            await self.session.close()

    # -- the connector's hooks ---------------------------------------------
    def _tuner(self) -> SocketTuner:
        return link_tuner(self.opts, self.role, self.connections, self.timeline)

    def new_socket(self, addr_info: Any) -> socket.socket:
        family, kind, proto, _, address = addr_info
        taken = self.early.take(address) if self.early is not None else None
        if taken is not None:
            sock, tuner = taken
        else:
            sock = socket.socket(family, kind, proto)
            tuner = self._tuner()
            try:
                path_rtt = self.path_rtt()
                if path_rtt is not None:  # (the first connection's: the path's, as a control connection's RTT)
                    tuner.ctl.note_control_rtt(path_rtt)
                tuner.before_handshake(sock)
            except OSError as exc:
                log.info("cannot size the socket before connecting: %s", exc)
        old = self._fresh.pop(sock.fileno(), None)
        if old is not None:  # (a socket that never connected, its fd reused)
            old.close()
        self._fresh[sock.fileno()] = tuner
        if self._first_sock is None:
            self._first_sock = sock
        return sock

    def handshake_rtt(self) -> float | None:
        """The first connection's RTT once its TCP handshake is done, in
        seconds (before TLS's, and before any request's answer)."""
        return handshake_rtt(self._first_sock)

    def path_rtt(self) -> int | None:
        """The first connection's least RTT so far, in microseconds (a
        running transfer's smoothed RTT counts the queue it fills)."""
        info = sockopt.tcp_info(self._first_sock) if self._first_sock is not None else {}
        rtt, least = info.get("rtt"), info.get("min_rtt")
        if not rtt:
            return None  # (no sample yet: its TCP handshake is not done)
        return int(min(rtt, least) if least else rtt)

    def link_of(self, transport: Any) -> Link | None:
        """The connection's Link, made (and its tuner attached) the first
        time the connection is seen."""
        if transport is None:
            return None
        link = self.links.get(transport)
        if link is None:
            sock = transport.get_extra_info("socket")
            if sock is None:
                return None
            tuner = self._fresh.pop(sock.fileno(), None)
            if tuner is None:
                tuner = self._tuner()
            raw = sock._sock if hasattr(sock, "_sock") else sock  # (asyncio's TransportSocket wraps it)
            tuner.after_handshake(raw)
            tuner.attach(raw)
            link = self.links[transport] = Link(tuner, raw)
        return link

    # -- requests ------------------------------------------------------------
    @contextlib.asynccontextmanager
    async def request(self, method: str, path: str, *, ok: tuple[int, ...], headers: dict[str, str] | None = None,
                      body: Callable[[Slot], Any] | None = None,
                      ready: Callable[[Slot], Awaitable[dict[str, str]]] | None = None,
                      ) -> AsyncIterator[tuple[aiohttp.ClientResponse, Slot]]:
        """The response to ``method path`` with a status in ``ok`` (any
        other is an HTTPError), and the slot naming its connection.
        ``body(slot)``: the request body, made once the slot exists;
        ``ready(slot)``: more headers, made once connected (:class:`Slot`)."""
        assert self.session is not None
        slot = Slot()
        slot.ready = ready
        token = _SLOT.set(slot)
        try:
            resp = await self.session.request(method, self.loc.url(path), headers=headers,
                                              data=body(slot) if body else None, allow_redirects=False)
        except (aiohttp.ClientError, OSError) as exc:
            raise connection_error(self.loc.at(path), exc) from exc
        finally:
            _SLOT.reset(token)
        async with resp:
            self._peer_report(resp, slot)
            if resp.status not in ok:
                raise status_error(self.loc, path, resp.status, resp.reason, method, resp.headers.get("Location"))
            coding = spans.content_coding(resp.headers.getall("Content-Encoding", []))
            if coding is not None:  # (asked for none: its bytes are not the file's)
                raise HTTPError(f"{self.loc.url(path)}: the server sent its answer with Content-Encoding"
                                f" {coding}, though asked for none; drsftp stores no coded bytes",
                                resp.status, transient=False)
            try:
                yield resp, slot
            except aiohttp.ClientError as exc:  # (reading the body; a local write's OSError is the file's)
                raise connection_error(self.loc.at(path), exc) from exc

    def _peer_report(self, resp: aiohttp.ClientResponse, slot: Slot) -> None:
        value = resp.headers.get(drsheader.HEADER)
        if value is None or slot.link is None:
            return
        try:
            pairs = drsheader.parse_report(value) or {}
        except drsheader.DRSArgumentError as exc:
            log.info("ignoring the server's DRS header: %s", exc)
            return
        self.drs_replies += 1
        if pairs:
            self.server_last = pairs
            slot.link.tuner.on_peer_pairs(pairs)

    # -- figures ---------------------------------------------------------------
    def summary(self) -> dict[str, Any]:
        """The connections' figures for the TransferResult."""
        sums = [link.tuner.summary() for link in self.links.values()]
        first = sums[0] if sums else {}

        def values(key: str) -> list[float]:
            return [s[key] for s in sums if s.get(key) is not None]

        avgs = values("rtt_avg_ms")
        return {
            "tuning": first.get("tuning"), "connections": len(sums),
            "drs_peer": self.drs_replies > 0, "drs_replies": self.drs_replies,
            "server_last_report": self.server_last,
            "rtt_min_ms": min(values("rtt_min_ms"), default=None),
            "rtt_avg_ms": round(sum(avgs) / len(avgs), 3) if avgs else None,
            "rtt_max_ms": max(values("rtt_max_ms"), default=None),
            "retransmits": sum(int(v) for v in values("retransmits")) if sums else None,
            "peak_rcvbuf": max(values("peak_rcvbuf"), default=None),
            "peak_sndbuf": max(values("peak_sndbuf"), default=None),
            "handshake_window": first.get("handshake_window"), "kernel_owns": first.get("kernel_owns"),
        }


async def on_pool(direction: str, loc: HTTPLocation, opts: TransferOptions, role: Role, connections: int,
                  run: Callable[[Pool, TransferOptions], Awaitable[TransferResult]],
                  early: Early | None = None) -> TransferResult:
    """One file's transfer, ``run(pool, opts)``, on a pool of its own,
    stopped at --max-time (transfer/maxtime.py); ``early``: its first
    connection, if begun (preconnect.py)."""

    async def within(o: TransferOptions) -> TransferResult:
        check_spec(o.tuning)
        async with Pool(loc, o, role, connections, early=early) as pool:
            return await run(pool, o)

    return await maxtime.within(opts, direction, loc.path, within)


async def together(*workers: Coroutine[Any, Any, None]) -> None:
    """Run ``workers`` at once; the first error ends them all."""
    tasks = [asyncio.ensure_future(w) for w in workers]
    try:
        await asyncio.gather(*tasks)
    finally:
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
