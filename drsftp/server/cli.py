"""`drsftp serve` and `drsftp passwd`: their options and what they run.
A usage problem is a ConfigError: the command line's one sentence, exit 2."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable

from ..tuning import names
from .config import ConfigError


def add_serve_parser(sub, tuning_arg: Callable[[str], str]) -> None:
    s = sub.add_parser("serve", help="run the FTP server with DRS")
    # Defaults live in drsftp.server.config.DEFAULTS: an option not given
    # (None) leaves the --config file's value in force.
    s.add_argument("--config", metavar="FILE",
                   help="TOML file of these options (keys with _ for -); options given here override it")
    s.add_argument("--root", help="directory to serve")
    s.add_argument("--host", "--bind", dest="host", help="address to listen on (default 127.0.0.1)")
    s.add_argument("--port", type=int, help="port (default 2121; 0: any free port)")
    s.add_argument("--user", help="one user, home --root (a users file is better: --users)")
    s.add_argument("--password", help="--user's password (hashed at start; visible in ps: prefer --users)")
    s.add_argument("--users", metavar="FILE", help="users file with hashed passwords (drsftp passwd)")
    s.add_argument("--anonymous-read", action="store_true", default=None,
                   help="allow anonymous download (never upload)")
    s.add_argument("--idle-timeout", type=float, help="seconds a session may idle (default 300; 0: no limit)")
    s.add_argument("--data-timeout", type=float, help="seconds a transfer may stall (default 120; 0: no limit)")
    s.add_argument("--read-only", action="store_true", default=None, help="no uploads or changes")
    s.add_argument("--tuning", type=tuning_arg, help=f"buffer tuning of every transfer: {', '.join(names())}"
                   " (default drs)")
    s.add_argument("--force-buffers", action="store_true", default=None,
                   help="use SO_RCVBUFFORCE/SO_SNDBUFFORCE (CAP_NET_ADMIN) past rmem_max/wmem_max")
    s.add_argument("--passive-ports", metavar="LO-HI", help="data ports to listen on, e.g. 60000-60100")
    s.add_argument("--data-interface", metavar="ADDR",
                   help="address data connections use: passive listeners bind it and PASV names it, active ones"
                        " leave from it (default: the control connection's)")
    s.add_argument("--masquerade-address", metavar="ADDR",
                   help="IPv4 address PASV names instead (a server behind NAT)")
    s.add_argument("--third-party-peers", metavar="ADDR|CIDR,...",
                   help="hosts other than the client that data connections may go to or come from"
                        " (server-to-server transfers); off by default (RFC 2577)")
    s.add_argument("--max-connections", type=int, help="sessions at once (default 256; 0: no limit)")
    s.add_argument("--max-connections-per-ip", type=int,
                   help="sessions at once from one address (default 32; 0: no limit)")
    s.add_argument("--max-streams", type=int, metavar="N",
                   help="MODE E data connections per session (default 64)")
    s.add_argument("--max-streams-total", type=int, metavar="N",
                   help="MODE E data connections of all sessions together (default 256)")
    s.add_argument("--log-file", metavar="FILE",
                   help="transfer log (one line per login and per transfer) and warnings; default stderr")
    s.add_argument("--log-format", choices=("text", "json"), help="transfer log lines: text (default) or json")
    s.add_argument("--tls-cert", metavar="FILE", help="certificate (PEM) for FTPS: AUTH TLS, PROT P")
    s.add_argument("--tls-key", metavar="FILE", help="private key (PEM; default: in --tls-cert)")
    s.add_argument("--require-tls", action="store_true", default=None, help="refuse plain-text login and data")
    s.add_argument("--implicit-tls-port", type=int, metavar="PORT",
                   help="also listen here for implicit FTPS (ftps://: TLS before the greeting; 990 by convention)")
    s.add_argument("--grace", type=float,
                   help="on SIGTERM, seconds running transfers may take before they are aborted (default 30)")
    s.add_argument("--buffer-budget",
                   help="socket buffers of all transfers together (default 256MiB; DRS shares it by need); 'off':"
                        " no budget, and DRS leaves buffers to kernel autotuning where it reaches further")
    s.add_argument("--http-port", type=int, metavar="PORT", help="also serve HTTPS/WebDAV here (docs/HTTP.md)")
    s.add_argument("--http-plain", action="store_true", default=None, help="serve --http-port as plain HTTP, no TLS")
    s.add_argument("--http-max-body", metavar="SIZE", help="largest HTTP upload, e.g. 10GiB (default: the disk's room)")
    s.add_argument("--macaroon-secret-file", metavar="FILE",
                   help="key of the macaroons HTTPS hands out (32 bytes or more; default: random, per process)")
    s.add_argument("--tpc-ca-file", metavar="FILE",
                   help="CA certificates (PEM) an HTTP COPY's remote is checked against (default: the system's)")
    s.add_argument("--metrics", metavar="ADDR:PORT",
                   help="serve Prometheus /metrics, /api/transfers and a status page / here (off by default;"
                        " PORT alone: 127.0.0.1)")
    s.add_argument("--metrics-token-file", metavar="FILE",
                   help="bearer token the metrics want (needed off loopback; a file keeps it out of ps)")


def add_passwd_parser(sub) -> None:
    pw = sub.add_parser("passwd", help="add, change or delete a user in a users file")
    pw.add_argument("file", help="users file (created if missing)")
    pw.add_argument("name", help="user name")
    pw.add_argument("--home", help="the user's home (default: the server's --root)")
    pw.add_argument("--read-only", action="store_true", help="download only")
    pw.add_argument("--password-stdin", action="store_true",
                    help="read the password from stdin (one line; where no terminal can ask for it)")
    pw.add_argument("--delete", action="store_true", help="remove the user")


def _size_arg(text: str, what: str) -> int:
    from ..tuning import parse_size

    try:
        return parse_size(text)
    except ValueError as exc:
        raise ConfigError(f"{what}: {exc}") from exc


def budget_arg(text: str) -> int | None:
    return None if text.strip().lower() == "off" else _size_arg(text, "--buffer-budget")


def cmd_serve(args) -> int:
    from . import ServerConfig, serve
    from . import config as server_config
    from .config import parse_port_range
    from .ops.translog import configure as configure_log

    given = {key: getattr(args, key, None) for key in server_config.KEYS}  # (metrics_token: the file only)
    o = server_config.merge(server_config.load(args.config) if args.config else {}, given, args.config)
    if o["log_file"]:
        try:
            open(o["log_file"], "a").close()
        except OSError as exc:
            raise ConfigError(f"cannot write log file {o['log_file']}: {exc.strerror}") from exc
    if o["users"] and not os.path.exists(o["users"]):
        raise ConfigError(f"users file not found: {o['users']}")
    budget = o["buffer_budget"]
    cfg = ServerConfig(
        root=o["root"], user=o["user"], password=o["password"], host=o["host"], port=o["port"],
        tuning=o["tuning"], force_buffers=o["force_buffers"],
        passive_ports=parse_port_range(o["passive_ports"]) if o["passive_ports"] else None,
        anonymous_read=o["anonymous_read"], max_cons=o["max_connections"],
        max_cons_per_ip=o["max_connections_per_ip"], write_perm=not o["read_only"],
        buffer_budget=budget if isinstance(budget, int) else budget_arg(budget), grace=o["grace"],
        users_file=o["users"], idle_timeout=o["idle_timeout"], data_timeout=o["data_timeout"],
        tls_cert=o["tls_cert"], tls_key=o["tls_key"], require_tls=o["require_tls"],
        implicit_tls_port=o["implicit_tls_port"],
        max_streams=o["max_streams"], max_streams_total=o["max_streams_total"], config_file=args.config,
        metrics=o["metrics"], metrics_token=o["metrics_token"], metrics_token_file=o["metrics_token_file"],
        data_interface=o["data_interface"], masquerade_address=o["masquerade_address"],
        third_party_peers=o["third_party_peers"], http_port=o["http_port"], http_plain=o["http_plain"],
        http_max_body=server_config.max_body_bytes(o["http_max_body"]),
        macaroon_secret_file=o["macaroon_secret_file"], tpc_ca_file=o["tpc_ca_file"],
        command_line_keys=frozenset(key for key, value in given.items() if value is not None),
    )
    configure_log(o["log_file"], o["log_format"])
    return serve(cfg)


def _holds_user(path: str, name: str) -> bool:
    """The users file has a line for ``name`` (the rule write_user replaces by)."""
    if not os.path.exists(path):
        return False
    with open(path) as f:
        return any(line.split(":", 1)[0] == name for line in f.read().splitlines())


def _can_prompt() -> bool:
    """getpass can ask without echo: on the controlling terminal, else on
    stdin if that is one (its fallback would echo, or read a pipe)."""
    try:
        os.close(os.open("/dev/tty", os.O_RDWR | os.O_NOCTTY))
    except OSError:
        return sys.stdin.isatty()
    return True


def _read_password(args) -> str:
    import getpass

    if args.password_stdin:
        line = sys.stdin.readline()
        if not line:
            raise ConfigError("--password-stdin: stdin ended before a password line")
        return line.rstrip("\n")
    if not _can_prompt():
        raise ConfigError("no terminal to ask the password on: give it on stdin with --password-stdin")
    try:
        password = getpass.getpass(f"password for {args.name}: ")
        again = getpass.getpass("again: ")
    except EOFError:
        print(file=sys.stderr)  # end the prompt's line
        raise ConfigError("input ended before a password: nothing written") from None
    if again != password:
        raise ConfigError("the passwords differ")
    return password


def _check_home(home: str | None) -> None:
    """A home serve would refuse is refused here, before the file changes:
    ':' or a line break would split the users file's NAME:HASH:HOME:PERM
    line; an absolute home must exist (a relative one is below the server's
    --root, unknown here)."""
    if home is None:
        return
    if any(c in home for c in ":\r\n\0"):
        raise ConfigError("--home cannot hold ':' or a line break: the users file separates its fields with them")
    if os.path.isabs(home) and not os.path.isdir(home):
        raise ConfigError(f"--home {home} is not a directory; make it first (serve refuses a user whose home"
                          " does not exist)")


def cmd_passwd(args) -> int:
    from .ops.users import (
        MIN_PASSWORD,
        NAME_RE,
        READ_PERM,
        WRITE_PERM,
        UserEntry,
        UsersFileError,
        hash_password,
        password_problem,
        write_user,
    )

    if not NAME_RE.match(args.name):
        raise ConfigError("user names are 1-64 letters, digits, '.', '_' or '-'")
    if args.delete:
        if not _holds_user(args.file, args.name):
            raise UsersFileError(f"{args.name} is not in {args.file}: nothing deleted")
        write_user(args.file, UserEntry(args.name, "", "", ""), delete=True)
        print(f"deleted {args.name} from {args.file}")
        return 0
    _check_home(args.home)
    password = _read_password(args)
    if password_problem(password):
        raise ConfigError(f"use a password of at least {MIN_PASSWORD} characters")
    # no --home: ".", which the server takes as its --root
    write_user(args.file, UserEntry(args.name, hash_password(password), args.home or ".",
                                    READ_PERM if args.read_only else WRITE_PERM))
    home = args.home or "the server's --root"
    print(f"{args.name} written to {args.file} (home: {home})")
    return 0
