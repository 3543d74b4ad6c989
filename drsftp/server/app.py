"""`drsftp serve`: build and run the standing server."""

from __future__ import annotations

import logging
import os
import signal
import socket
import sys
import time
from dataclasses import dataclass

from pyftpdlib.servers import FTPServer

from ..ftp.eblock import MAX_STREAMS
from ..io import sockopt
from ..tuning import check_spec
from ..tuning.actuation import autotuning_reaches_further
from . import config, tlsfiles
from .config import ConfigError
from .ftp import compat
from .ftp.eblock.streams import Limits, StreamCount
from .ftp.handler import DRSControlMixin, DRSFTPHandler, tls_handler_class
from .ftp.tls import implicit
from .ops import translog
from .ops.budgetlock import LockedBudget
from .ops.users import (
    MIN_PASSWORD,
    READ_PERM,
    WRITE_PERM,
    HashedAuthorizer,
    UserEntry,
    UsersFileError,
    exposed_secret,
    hash_password,
    password_problem,
    read_users,
)
from .peers import advertised_address, parse_peers

log = logging.getLogger("drsftp.server")


@dataclass
class ServerConfig:
    root: str
    user: str | None = None
    password: str | None = None
    host: str = "127.0.0.1"
    port: int = 2121
    tuning: str = "drs"
    force_buffers: bool = False
    passive_ports: tuple[int, int] | None = None
    anonymous_read: bool = False
    max_cons: int = 256
    max_cons_per_ip: int = 32
    write_perm: bool = True
    buffer_budget: int | None = 256 << 20  # all transfers' buffers together (None: no budget)
    grace: float = 30.0  # seconds running transfers get on SIGTERM
    users_file: str | None = None
    idle_timeout: float = 300.0  # control connection without commands
    data_timeout: float = 120.0  # data connection without progress
    tls_cert: str | None = None  # FTPS (RFC 4217) when given
    tls_key: str | None = None
    require_tls: bool = False  # refuse plain-text login and data
    implicit_tls_port: int | None = None  # also listen for implicit FTPS (ftps://) here
    max_streams: int = MAX_STREAMS  # MODE E streams per session (docs/EBLOCK.md)
    max_streams_total: int = 256  # MODE E streams of all sessions together
    config_file: str | None = None  # the --config file, kept out of every home
    metrics: str | None = None  # ADDR:PORT of the metrics and status page (ops/metrics.py); None: off
    metrics_token: str | None = None  # the bearer token they want (needed off loopback)
    metrics_token_file: str | None = None  # where the token came from, kept out of every home
    data_interface: str | None = None  # data sockets bind it, PASV names it (ftp/thirdparty.py)
    masquerade_address: str | None = None  # what PASV names behind NAT
    third_party_peers: str | list | None = None  # ADDR|CIDR,...: foreign data peers allowed (RFC 2577)
    http_port: int | None = None  # HTTPS/WebDAV here too (docs/HTTP.md); None: off
    http_plain: bool = False  # ... as plain HTTP (no certificate needed)
    http_max_body: int | None = None  # bytes of one PUT at most; None: the disk's room
    macaroon_secret_file: str | None = None  # the macaroons' key (http/tpc/tokens.py); None: random per process
    tpc_ca_file: str | None = None  # CAs a COPY's remote is checked against; None: the system's
    command_line_keys: frozenset[str] = frozenset()  # config keys the command line set: a reload keeps them


def build_server(cfg: ServerConfig) -> FTPServer:
    config.check_options({
        "host": cfg.host, "port": cfg.port, "idle_timeout": cfg.idle_timeout, "data_timeout": cfg.data_timeout,
        "grace": cfg.grace, "max_connections": cfg.max_cons, "max_connections_per_ip": cfg.max_cons_per_ip,
        "max_streams": cfg.max_streams, "max_streams_total": cfg.max_streams_total,
        "buffer_budget": cfg.buffer_budget, "implicit_tls_port": cfg.implicit_tls_port, "metrics": cfg.metrics,
        "metrics_token": cfg.metrics_token, "data_interface": cfg.data_interface,
        "masquerade_address": cfg.masquerade_address, "third_party_peers": cfg.third_party_peers,
        "http_port": cfg.http_port})
    _check_metrics_access(cfg)
    if cfg.http_port is not None or cfg.http_plain or cfg.http_max_body is not None or cfg.macaroon_secret_file \
            or cfg.tpc_ca_file:
        from .http import front  # (aiohttp loads only for a server that speaks HTTP)

        front.check(cfg)
    if not os.path.isdir(cfg.root):
        raise ConfigError(f"root directory does not exist: {cfg.root}")
    try:
        check_spec(cfg.tuning)
    except ValueError as exc:
        raise ConfigError(str(exc)) from exc
    if not cfg.user and not cfg.anonymous_read and not cfg.users_file:
        raise ConfigError("give --users FILE, --user and --password, or --anonymous-read")
    if cfg.user and cfg.password is None:
        raise ConfigError("--user needs --password")
    base = DRSFTPHandler
    if cfg.require_tls and not cfg.tls_cert:
        raise ConfigError("--require-tls needs --tls-cert (and --tls-key)")
    if cfg.tls_key and not cfg.tls_cert:
        raise ConfigError("--tls-key needs --tls-cert (the certificate the key belongs to)")
    if cfg.implicit_tls_port is not None and not cfg.tls_cert:
        raise ConfigError("--implicit-tls-port needs --tls-cert (and --tls-key)")
    if cfg.implicit_tls_port and cfg.implicit_tls_port == cfg.port:
        raise ConfigError(f"--implicit-tls-port {cfg.port} is --port too: give the implicit FTPS listener"
                          " a port of its own (990 by convention)")
    _check_password(cfg)
    authorizer = _authorizer(cfg)
    if cfg.tls_cert:
        try:
            base = tls_handler_class()
        except ImportError as exc:
            raise ConfigError("FTPS needs pyOpenSSL (pip install pyOpenSSL)") from exc
    handler = type("ConfiguredDRSFTPHandler", (base,), {})
    if cfg.tls_cert:
        handler.certfile, handler.keyfile = cfg.tls_cert, cfg.tls_key or cfg.tls_cert
        handler.tls_control_required = handler.tls_data_required = cfg.require_tls
        tlsfiles.load(handler)  # the control connection's context and the MODE E streams'
    handler.authorizer = authorizer
    handler.timeout = cfg.idle_timeout
    handler.dtp_handler = type("ConfiguredDTP", (handler.dtp_handler,), {"timeout": cfg.data_timeout})
    handler.tuning_spec = cfg.tuning
    if not 1 <= cfg.max_streams <= cfg.max_streams_total:
        raise ConfigError("--max-streams must be at least 1 and at most --max-streams-total")
    handler.eblock_limits = Limits(per_session=cfg.max_streams, per_server=cfg.max_streams_total)
    handler.eblock_count = StreamCount()
    handler.ranged_downloads = translog.RangedDownloads()  # its sessions' downloads on byte ranges
    handler.host_limits = sockopt.read_host_limits()
    handler.allow_force = cfg.force_buffers and handler.host_limits.can_force
    # (one budget for the FTP ioloop and the HTTP thread: locked)
    handler.buffer_budget = LockedBudget(cfg.buffer_budget) if cfg.buffer_budget else None
    limits = handler.host_limits
    if handler.buffer_budget and any(autotuning_reaches_further(limits, handler.allow_force, r)
                                     for r in (True, False)):
        log.info("kernel autotuning here may grow buffers past what setsockopt can set (tcp_rmem/tcp_wmem"
                 " max > 2 x rmem_max/wmem_max): a transfer is left to it only while --buffer-budget can"
                 " hold that maximum, the others stay within rmem_max/wmem_max; --force-buffers"
                 " (CAP_NET_ADMIN) lets DRS set larger buffers itself")
    if cfg.force_buffers and not handler.allow_force:
        log.warning("--force-buffers: no CAP_NET_ADMIN here; buffers stay capped at rmem_max/wmem_max")
    if cfg.metrics:
        from .ops.metrics import Metrics

        handler.metrics = Metrics(handler.buffer_budget)
    if cfg.passive_ports:
        handler.passive_ports = range(cfg.passive_ports[0], cfg.passive_ports[1] + 1)
    _data_addresses(handler, cfg)
    server = _listen(cfg, cfg.port, handler)
    server.implicit_tls = None
    if cfg.implicit_tls_port is not None:
        try:
            server.implicit_tls = _listen(cfg, cfg.implicit_tls_port, implicit.handler_class(handler), server)
        except ConfigError:
            server.close()
            raise
    return server


def _check_password(cfg: ServerConfig) -> None:
    """--user's password meets `drsftp passwd`'s rule (users.password_problem):
    an empty one let anyone log in as that user, with write rights."""
    problem = password_problem(cfg.password) if cfg.user and cfg.password is not None else None
    if problem:
        where = ("password in " + cfg.config_file if cfg.config_file and "password" not in cfg.command_line_keys
                 else "--password")
        raise ConfigError(f"the {where} for user {cfg.user!r} {problem}: use at least {MIN_PASSWORD}"
                          " characters (or --users FILE, written by `drsftp passwd`)")


def _data_addresses(handler: type, cfg: ServerConfig) -> None:
    """--data-interface, --masquerade-address, --third-party-peers
    (ftp/thirdparty.py; docs/PROTOCOL.md, "Third-party transfers")."""
    if cfg.data_interface:
        handler.data_interface = cfg.data_interface.strip()
        try:  # an address this host has: a listener or an outgoing connection could not use another
            family = socket.AF_INET6 if ":" in handler.data_interface else socket.AF_INET
            socket.create_server((handler.data_interface, 0), family=family).close()
        except OSError as exc:
            raise ConfigError(f"--data-interface {handler.data_interface} is not an address of this host:"
                              f" {exc.strerror or exc}") from exc
    _peers_and_masquerade(handler, cfg.third_party_peers, cfg.masquerade_address)
    if handler.third_party_peers:
        log.info("third-party data connections allowed with %s",
                 ", ".join(map(str, handler.third_party_peers.networks)))


def _peers_and_masquerade(handler: type, peers: str | list | None, masquerade: str | None) -> None:
    """The third-party peers and what PASV names, both checked before
    either is set (at start and at a reload; the data interface is set)."""
    parsed = parse_peers(peers or "")
    handler.masquerade_address = advertised_address(masquerade and masquerade.strip(), handler.data_interface)
    handler.third_party_peers = parsed


def _reload_data_addresses(handler: type, cfg: ServerConfig) -> str:
    """RELOADED_KEYS from the config file, each unless the command line set
    it; checked in full before any is applied."""
    assert cfg.config_file is not None
    values = config.load(cfg.config_file)
    keep = cfg.command_line_keys
    peers = cfg.third_party_peers if "third_party_peers" in keep else values.get("third_party_peers")
    masquerade = cfg.masquerade_address if "masquerade_address" in keep else values.get("masquerade_address")
    _peers_and_masquerade(handler, peers, masquerade)
    listed = ", ".join(map(str, handler.third_party_peers.networks)) or "none"
    return f"third-party peers ({listed}) and PASV address ({handler.masquerade_address or 'the control one'})"


def _check_metrics_access(cfg: ServerConfig) -> None:
    """The metrics endpoint off loopback wants a token (docs/SECURITY.md)."""
    if cfg.metrics and not cfg.metrics_token and not config.is_loopback(config.parse_metrics_address(cfg.metrics)[0]):
        raise ConfigError(f"--metrics {cfg.metrics} listens beyond this host: give a metrics token"
                          " (--metrics-token-file FILE, or metrics_token in the config file) so that only its"
                          " holders can read the metrics")


def _listen(cfg: ServerConfig, port: int, handler: type, main: FTPServer | None = None) -> FTPServer:
    """A listener; a second one (``main`` given) shares the main one's
    ioloop and its count of sessions per address."""
    try:
        server = FTPServer((cfg.host, port), handler, ioloop=main.ioloop if main else None)
    except OSError as exc:
        raise ConfigError(f"cannot listen on {cfg.host}:{port}: {exc.strerror or exc}") from exc
    server.max_cons = cfg.max_cons  # (pyftpdlib counts the shared ioloop's sockets: both listeners' sessions)
    server.max_cons_per_ip = cfg.max_cons_per_ip
    if main is not None:
        server.ip_map = main.ip_map
    return server


def listeners(server: FTPServer) -> list[FTPServer]:
    """The server's listeners: the main one, and the implicit FTPS one if any."""
    return [server] + ([server.implicit_tls] if server.implicit_tls is not None else [])


def _authorizer(cfg: ServerConfig, password_hash: str | None = None) -> HashedAuthorizer:
    """The users: the users file, --user, --anonymous-read.  ``password_hash``:
    --user's, kept from the first build (a reload re-reads the file only)."""
    authorizer = HashedAuthorizer()
    root = os.path.abspath(cfg.root)
    try:
        if cfg.users_file:
            for entry in read_users(cfg.users_file, root):
                if not cfg.write_perm:
                    entry.perm = READ_PERM
                authorizer.add_hashed_user(entry)
        if cfg.user:
            if not password_hash:
                assert cfg.password is not None  # build_server refuses --user without --password
                password_hash = hash_password(cfg.password)
            authorizer.add_hashed_user(UserEntry(cfg.user, password_hash, root,
                                                 WRITE_PERM if cfg.write_perm else READ_PERM))
    except (UsersFileError, ValueError) as exc:
        raise ConfigError(str(exc)) from exc
    if cfg.anonymous_read:
        authorizer.add_anonymous(root, perm=READ_PERM)  # never anonymous write
    homes = {name: user["home"] for name, user in authorizer.user_table.items()}
    problem = exposed_secret(homes, _secrets(cfg))
    if problem:
        raise ConfigError(problem)
    return authorizer


def _secrets(cfg: ServerConfig) -> dict[str, str]:
    """The files no user may download: the hashes, the private key (in the
    certificate file when no key file is given), the config."""
    files = {"the users file": cfg.users_file, "the TLS key": cfg.tls_key or cfg.tls_cert,
             "the config file": cfg.config_file, "the metrics token file": cfg.metrics_token_file,
             "the macaroon secret file": cfg.macaroon_secret_file}
    return {what: path for what, path in files.items() if path}


# What a reload takes from the config file; the data interface stays (its sockets are bound).
RELOADED_KEYS = ("third_party_peers", "masquerade_address")


def reload(server: FTPServer, cfg: ServerConfig) -> list[str]:
    """SIGHUP: re-read the users file, the TLS certificate and key, and the
    config file's RELOADED_KEYS.  New logins and TLS handshakes use them,
    and every data connection opened from then on the new peers and PASV
    address; running sessions and transfers go on (a session keeps the TLS
    context it started with).  Whatever fails to load keeps its old version;
    returns what was reloaded."""
    handler = server.handler
    done = []
    if cfg.config_file and not set(RELOADED_KEYS) <= cfg.command_line_keys:
        try:
            done.append(_reload_data_addresses(handler, cfg))
        except ValueError as exc:  # (ConfigError is one)
            log.error("reload: kept the old third-party peers and PASV address: %s", exc)
    if cfg.users_file:
        try:
            old = handler.authorizer
            keep = old.user_table.get(cfg.user, {}).get("pwd") if cfg.user else None
            handler.authorizer = _authorizer(cfg, keep)
            done.append(f"users file {cfg.users_file} ({len(handler.authorizer.user_table)} users)")
        except ConfigError as exc:
            log.error("reload: kept the old users: %s", exc)
    if cfg.tls_cert:
        try:
            tlsfiles.load(handler)
            done.append(f"TLS certificate {cfg.tls_cert}")
        except ConfigError as exc:
            log.error("reload: kept the old TLS certificate: %s", exc)
    return done


def serve(cfg: ServerConfig, ready_stream=sys.stdout) -> int:
    """Serve until SIGTERM/SIGINT; then stop accepting, let running transfers
    finish within ``cfg.grace`` seconds, abort the rest (426), exit 0.
    A second signal aborts at once."""
    server = build_server(cfg)
    endpoint = http = None
    try:
        endpoint = _start_metrics(server, cfg)
        http = _start_http(server, cfg)
    except ConfigError:
        if endpoint is not None:
            endpoint.close()
        server.close_all()
        raise
    # the handlers before the ready lines: whoever reads them may signal at once
    signals: list[int] = []
    reloads: list[int] = []
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda signum, frame: signals.append(signum))
    signal.signal(signal.SIGHUP, lambda signum, frame: reloads.append(signum))
    host, port = server.socket.getsockname()[:2]
    print(f"drsftp serve: listening on {host}:{port} (tuning {cfg.tuning})", file=ready_stream, flush=True)
    if server.implicit_tls is not None:
        host, port = server.implicit_tls.socket.getsockname()[:2]
        print(f"drsftp serve: implicit FTPS (ftps://) on {host}:{port}", file=ready_stream, flush=True)
    if http is not None:
        host, port = http.address
        print(f"drsftp serve: {'HTTPS' if http.tls else 'HTTP (plain)'} on {host}:{port}", file=ready_stream,
              flush=True)
    if endpoint is not None:
        print(f"drsftp serve: metrics and status page on {endpoint.url}", file=ready_stream, flush=True)
    deadline = None
    try:
        while True:
            # one poll at a time: the signal handlers only record, never
            # touch the ioloop from signal context
            server.ioloop.loop(timeout=0.2, blocking=False)
            if reloads:
                reloads.clear()
                for what in reload(server, cfg):
                    translog.emit(translog.reload_record(time.time(), what))
                if http is not None and http.tls is not None:
                    http.reload_tls(cfg.tls_cert, cfg.tls_key)
            if not signals:
                continue
            if deadline is None:
                deadline = time.monotonic() + cfg.grace
                server.handler.shutting_down = True
                for listener in listeners(server):
                    listener.close()  # the listener only: no new sessions
                if http is not None:
                    http.stop_accepting(cfg.grace)
            running = _shutdown_step(server)
            requests = http.running() if http is not None else 0
            if not running and not requests:
                break
            if time.monotonic() >= deadline or len(signals) > 1:
                log.warning("grace period over: aborting %d transfer(s)", len(running) + requests)
                for h in running:
                    h.abort_for_shutdown()
                _flush(server, 1.0)
                break
    finally:
        if http is not None:
            http.close()  # (what still runs is aborted: its part file kept)
        if endpoint is not None:
            endpoint.close()
        server.close_all()
    return 0


def _start_http(server: FTPServer, cfg: ServerConfig):
    """--http-port: the HTTPS/WebDAV front in a thread of its own (docs/HTTP.md)."""
    if cfg.http_port is None:
        return None
    from .http import front

    http = front.build(server.handler, cfg)
    http.start()
    return http


def _start_metrics(server: FTPServer, cfg: ServerConfig):
    """--metrics: its HTTP server in threads of its own, fed by the ioloop."""
    metrics = server.handler.metrics
    if metrics is None or cfg.metrics is None:
        return None
    from .ops.metrics import Endpoint

    metrics.start_publishing(server.ioloop, lambda: _sessions(server))
    return Endpoint(metrics, *config.parse_metrics_address(cfg.metrics), token=cfg.metrics_token)


def _sessions(server) -> list[DRSControlMixin]:
    return [h for h in list(server.ioloop.socket_map.values()) if isinstance(h, DRSControlMixin)]


def _shutdown_step(server) -> list[DRSControlMixin]:
    """Close idle sessions (421); return those whose transfer still runs."""
    running = []
    for h in _sessions(server):
        if h.transfer_running():
            running.append(h)
        elif not compat.closed(h) and not getattr(h, "_bye_sent", False):
            h._bye_sent = True
            h.respond("421 Server shutting down.")
            h.close_when_done()
    return running


def _flush(server, seconds: float) -> None:
    end = time.monotonic() + seconds
    while time.monotonic() < end and _sessions(server):
        server.ioloop.loop(timeout=0.05, blocking=False)
