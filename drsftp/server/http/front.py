"""The HTTPS listener of `drsftp serve`: an asyncio loop in a thread of its
own (docs/decisions/0033-aiohttp-for-http.md), started after the FTP server
is built and stopped with it.

The socket is bound in the caller's thread, so a port in use is a
ConfigError before the server reports ready.  aiohttp's parser (llhttp)
refuses request smuggling (Content-Length with Transfer-Encoding), bad
chunk sizes and header lines past MAX_FIELD bytes (400).  A connection
counts against --max-connections and --max-connections-per-ip as an FTP
session does (503 past them); the watchdog closes one that has not
completed a request's headers within ``header_timeout`` seconds of opening
or of its last response (slowloris: a slow client holds one connection of
its address's share, for that long).  Shutdown: stop accepting, let
running requests finish within the grace, then abort them.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import ssl
import threading
import time
from concurrent.futures import Future
from typing import Any

from aiohttp import web

from ...io import tlspolicy
from ..config import ConfigError
from .aiocompat import name_the_server
from .drs import Connection, Settings
from .service import Service

log = logging.getLogger("drsftp.server")


class _OneLine(logging.Filter):
    """aiohttp logs a request its parser refused (smuggling, oversized
    headers) as an error with a traceback: one line at INFO says it."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.exc_info and record.exc_info[1] is not None:
            record.msg = f"{record.getMessage()}: {' '.join(str(record.exc_info[1]).split())[:200]}"
            record.args, record.exc_info, record.exc_text = (), None, None
            record.levelno, record.levelname = logging.INFO, "INFO"
        return True


parser_log = logging.getLogger("drsftp.server.http")
parser_log.addFilter(_OneLine())

MAX_FIELD = 8190  # bytes of the request line and of one header field (431/400 past it)
MAX_HEADERS = 100  # header fields of one request
READ_BUFFER = 256 * 1024  # bytes of a request body buffered per connection before reading pauses
WATCH_EVERY = 0.5  # s between the watchdog's looks
BUSY = (b"HTTP/1.1 503 Service Unavailable\r\nConnection: close\r\nContent-Length: 40\r\n\r\n"
        b"Too many connections: try again later.\r\n")


def tls_context(cert: str, key: str | None) -> ssl.SSLContext:
    ctx = tlspolicy.apply(ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER))
    try:
        ctx.load_cert_chain(cert, key or cert)
    except (OSError, ssl.SSLError) as exc:
        raise ConfigError(f"cannot load the TLS certificate {cert} for HTTPS: {exc}") from exc
    ctx.set_alpn_protocols(["http/1.1"])
    return ctx


class _Server(web.Server):
    """aiohttp's low-level server, counting connections and giving each
    its drs.Connection."""

    front: HTTPFront

    def connection_made(self, handler, transport) -> None:
        super().connection_made(handler, transport)
        front, conns = self.front, self.front.service.conns
        peer = (transport.get_extra_info("peername") or ("?",))[0]
        per_ip = sum(1 for c in conns.values() if c.peer == peer)
        if (front.max_cons and len(conns) >= front.max_cons) or (
                front.max_cons_per_ip and per_ip >= front.max_cons_per_ip):
            transport.write(BUSY)
            transport.close()
            return
        conns[handler] = Connection(transport.get_extra_info("socket"), front.settings, peer)

    def connection_lost(self, handler, exc=None) -> None:
        conn = self.front.service.conns.pop(handler, None)
        if conn is not None:
            conn.close(lost=exc is not None)
        super().connection_lost(handler, exc)


class HTTPFront:
    def __init__(self, service: Service, host: str, port: int, tls: ssl.SSLContext | None, *,
                 settings: Settings, header_timeout: float, max_cons: int = 0, max_cons_per_ip: int = 0) -> None:
        self.service, self.tls, self.settings = service, tls, settings
        self.header_timeout, self.max_cons, self.max_cons_per_ip = header_timeout, max_cons, max_cons_per_ip
        name_the_server("drsftp")
        try:
            family = socket.AF_INET6 if ":" in host else socket.AF_INET
            self.sock = socket.create_server((host, port), family=family, backlog=128)
        except OSError as exc:
            raise ConfigError(f"cannot listen for HTTP on {host}:{port}: {exc.strerror or exc}") from exc
        self.address = self.sock.getsockname()[:2]
        self.loop = asyncio.new_event_loop()
        self._ready: Future[None] = Future()
        self._thread = threading.Thread(target=self._run, name="drsftp-http", daemon=True)
        self._web: _Server | None = None
        self._listener: asyncio.Server | None = None

    def start(self) -> None:
        self._thread.start()
        self._ready.result(timeout=30)

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        try:
            self.loop.run_until_complete(self._start())
        except BaseException as exc:  # (the caller raises it)
            self._ready.set_exception(exc)
            return
        self._ready.set_result(None)
        self.loop.run_forever()

    async def _start(self) -> None:
        self._web = _Server(self.service, access_log=None, logger=parser_log, max_line_size=MAX_FIELD,
                            max_field_size=MAX_FIELD, max_headers=MAX_HEADERS, read_bufsize=READ_BUFFER,
                            keepalive_timeout=self.header_timeout or 3600, lingering_time=2.0)
        self._web.front = self
        if self.tls is not None:
            self._listener = await self.loop.create_server(self._web, sock=self.sock, ssl=self.tls,
                                                           ssl_handshake_timeout=self.header_timeout or None)
        else:
            self._listener = await self.loop.create_server(self._web, sock=self.sock)
        self.loop.call_later(WATCH_EVERY, self._watch)

    def _watch(self) -> None:
        """Close connections that sent no complete request for header_timeout."""
        if self.header_timeout:
            now = time.monotonic()
            for handler, conn in list(self.service.conns.items()):
                if not conn.busy and now - conn.idle_since > self.header_timeout:
                    handler.force_close()
                    if handler.transport is not None:
                        handler.transport.close()
        self.loop.call_later(WATCH_EVERY, self._watch)

    # -- from the serve loop's thread ------------------------------------------
    def stop_accepting(self, grace: float) -> None:
        """No new connections; idle ones closed; running requests get ``grace`` seconds."""
        asyncio.run_coroutine_threadsafe(self._stop(grace), self.loop)

    async def _stop(self, grace: float) -> None:
        if self._listener is not None:
            self._listener.close()
        if self._web is not None:
            await self._web.shutdown(grace)

    def reload_tls(self, cert: str, key: str | None) -> None:
        """SIGHUP: new handshakes use the certificate as it is now (in the
        loop's thread, where the handshakes run)."""
        self.loop.call_soon_threadsafe(self._reload_tls, cert, key)

    def _reload_tls(self, cert: str, key: str | None) -> None:
        try:
            assert self.tls is not None
            self.tls.load_cert_chain(cert, key or cert)
        except (OSError, ssl.SSLError) as exc:
            log.error("reload: HTTPS kept the old TLS certificate: %s", exc)

    def running(self) -> int:
        return self.service.running

    def close(self) -> None:
        """Abort whatever runs, give every tuner's budget back, end the thread."""
        if self._thread.is_alive():
            try:
                asyncio.run_coroutine_threadsafe(self._abort(), self.loop).result(timeout=5)
            except Exception as exc:  # (closing regardless)
                log.debug("http: abort at close: %s", exc)
            self.loop.call_soon_threadsafe(self.loop.stop)
            self._thread.join(10)
        if not self._thread.is_alive():
            self.loop.close()
        self.sock.close()

    async def _abort(self) -> None:
        if self._listener is not None:
            self._listener.close()
        for handler in list(self.service.conns):
            handler.force_close()
            if handler.transport is not None:
                handler.transport.abort()
        for conn in list(self.service.conns.values()):
            conn.close()
        self.service.conns.clear()
        if self.service.tpc is not None:
            await self.service.tpc.links.close()  # (COPY's kept-alive connections to remotes)
        await asyncio.sleep(0)


HEADER_TIMEOUT = 60.0  # s a connection may take to send a request's headers (--idle-timeout, if shorter)


def check(cfg) -> None:
    """--http-port's companions (app.ServerConfig), before anything listens."""
    if cfg.http_port is None:
        if cfg.http_plain or cfg.http_max_body is not None or cfg.macaroon_secret_file or cfg.tpc_ca_file:
            raise ConfigError("--http-plain, --http-max-body, --macaroon-secret-file and --tpc-ca-file need"
                              " --http-port")
        return
    if not cfg.tls_cert and not cfg.http_plain:
        raise ConfigError("--http-port needs --tls-cert (and --tls-key) for HTTPS, or --http-plain for plain"
                          " HTTP")
    if cfg.http_plain and cfg.require_tls:
        raise ConfigError("--http-plain would take passwords in clear text, which --require-tls refuses")
    if cfg.http_port and cfg.http_port in (cfg.port, cfg.implicit_tls_port):
        raise ConfigError(f"--http-port {cfg.http_port} is another listener's port: give HTTP a port of its own")
    if cfg.http_max_body is not None and cfg.http_max_body < 1:
        raise ConfigError("--http-max-body must be a size of 1 byte or more")


def _tpc(cfg, settings: Settings):
    """COPY's and the macaroons' settings (tpc/): the token secret, and the
    CAs a COPY's remote is checked against (--tpc-ca-file, else the system's)."""
    from .tpc.handlers import TPC
    from .tpc.tokens import Tokens, load_secret

    client = tlspolicy.apply(ssl.create_default_context())
    if cfg.tpc_ca_file:
        try:
            client.load_verify_locations(cafile=cfg.tpc_ca_file)
        except (OSError, ssl.SSLError) as exc:
            raise ConfigError(f"cannot load --tpc-ca-file {cfg.tpc_ca_file}: {exc}") from exc
    return TPC(Tokens(load_secret(cfg.macaroon_secret_file)), client, cfg.max_streams, cfg.data_timeout or None,
               settings)


def build(handler: Any, cfg) -> HTTPFront:
    """The HTTP front of the FTP server whose handler class is ``handler``
    (its users, budget, tuning, metrics), bound, not started."""
    tls = None if cfg.http_plain else tls_context(cfg.tls_cert, cfg.tls_key)
    service = Service(handler, tls=tls is not None, max_body=cfg.http_max_body,
                      data_timeout=cfg.data_timeout or None)
    settings = Settings(cfg.tuning, handler.allow_force, handler.host_limits, handler.buffer_budget)
    service.tpc = _tpc(cfg, settings)
    header_timeout = min(cfg.idle_timeout or HEADER_TIMEOUT, HEADER_TIMEOUT)
    return HTTPFront(service, cfg.host, cfg.http_port, tls, settings=settings, header_timeout=header_timeout,
                     max_cons=cfg.max_cons, max_cons_per_ip=cfg.max_cons_per_ip)
