"""`drsftp serve`: build and run the standing server."""

from __future__ import annotations

import logging
import os
import signal
import sys
from dataclasses import dataclass

from pyftpdlib.authorizers import DummyAuthorizer
from pyftpdlib.servers import FTPServer

from .. import sockopt
from ..tuning import check_spec
from .handler import DRSFTPHandler

log = logging.getLogger("drsftp.server")


class ConfigError(ValueError):
    pass


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


def parse_port_range(text: str) -> tuple[int, int]:
    try:
        lo, hi = (int(x) for x in text.split("-", 1))
    except ValueError as exc:
        raise ConfigError(f"passive ports must look like 60000-60100, not {text!r}") from exc
    if not 1024 <= lo <= hi <= 65535:
        raise ConfigError(f"passive port range {text!r} must lie within 1024-65535")
    return lo, hi


def build_server(cfg: ServerConfig) -> FTPServer:
    if not os.path.isdir(cfg.root):
        raise ConfigError(f"root directory does not exist: {cfg.root}")
    try:
        check_spec(cfg.tuning)
    except ValueError as exc:
        raise ConfigError(str(exc)) from exc
    if not cfg.user and not cfg.anonymous_read:
        raise ConfigError("give --user and --password, or --anonymous-read")
    if cfg.user and cfg.password is None:
        raise ConfigError("--user needs --password")
    authorizer = DummyAuthorizer()
    root = os.path.abspath(cfg.root)
    if cfg.user:
        authorizer.add_user(cfg.user, cfg.password, root, perm="elradfmwMT" if cfg.write_perm else "elr")
    if cfg.anonymous_read:
        authorizer.add_anonymous(root, perm="elr")  # never anonymous write
    handler = type("ConfiguredDRSFTPHandler", (DRSFTPHandler,), {})
    handler.authorizer = authorizer
    handler.tuning_spec = cfg.tuning
    handler.host_limits = sockopt.HostLimits.read()
    handler.allow_force = cfg.force_buffers and handler.host_limits.can_force
    if cfg.force_buffers and not handler.allow_force:
        log.warning("--force-buffers: no CAP_NET_ADMIN here; buffers stay capped at rmem_max/wmem_max")
    if cfg.passive_ports:
        handler.passive_ports = range(cfg.passive_ports[0], cfg.passive_ports[1] + 1)
    try:
        server = FTPServer((cfg.host, cfg.port), handler)
    except OSError as exc:
        raise ConfigError(f"cannot listen on {cfg.host}:{cfg.port}: {exc.strerror or exc}") from exc
    server.max_cons = cfg.max_cons
    server.max_cons_per_ip = cfg.max_cons_per_ip
    return server


def serve(cfg: ServerConfig, ready_stream=sys.stdout) -> int:
    server = build_server(cfg)
    host, port = server.socket.getsockname()[:2]
    print(f"drsftp serve: listening on {host}:{port} (tuning {cfg.tuning})", file=ready_stream, flush=True)

    def stop(signum, frame):
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, stop)
    try:
        server.serve_forever(handle_exit=False)
    except KeyboardInterrupt:
        pass
    finally:
        server.close_all()
    return 0
