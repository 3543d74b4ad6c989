"""The `drsftp` command line.  Every failure is one line on stderr and a
non-zero exit: 1 for a failed operation, 2 for bad usage, 130 for Ctrl-C."""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import sys

from . import __version__
from .tuning import check_spec, names


class UsageError(Exception):
    pass


def _tuning_arg(text: str) -> str:
    try:
        return check_spec(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from exc


def _add_transfer_opts(p: argparse.ArgumentParser) -> None:
    p.add_argument("--tuning", type=_tuning_arg, default="drs",
                   help=f"buffer tuning: {', '.join(names())} (fixed:SIZE, drs:CAP); default drs")
    p.add_argument("--continue", dest="resume", action="store_true", help="resume with REST")
    p.add_argument("--json", metavar="FILE", help="write the transfer's figures and timeline as JSON")
    p.add_argument("--force-buffers", action="store_true",
                   help="use SO_RCVBUFFORCE/SO_SNDBUFFORCE (CAP_NET_ADMIN) past rmem_max/wmem_max")
    p.add_argument("--no-drs-command", action="store_true",
                   help="never send the DRS command (right-size this end alone)")
    p.add_argument("--progress", choices=("auto", "always", "never"), default="auto")
    p.add_argument("--netrc", metavar="FILE", help="credentials file (default ~/.netrc)")
    p.add_argument("--timeout", type=float, default=60.0, help="seconds a stalled transfer may last")
    p.add_argument("--retries", type=int, default=0, metavar="N",
                   help="after a dropped connection or 4xx reply, reconnect and resume up to N times")
    p.add_argument("--verify", action="store_true",
                   help="compare SHA-256 with the server's HASH afterwards (non-zero exit if different)")
    p.add_argument("--max-time", type=float, metavar="SECONDS",
                   help="stop after this long (ABOR), keep what arrived, exit 28 (as curl)")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="drsftp", description=__doc__.splitlines()[0])
    parser.add_argument("--version", action="version", version=f"drsftp {__version__}")
    parser.add_argument("-v", "--verbose", action="count", default=0)
    sub = parser.add_subparsers(dest="command", required=True)

    s = sub.add_parser("serve", help="run the FTP server with DRS")
    s.add_argument("--root", required=True, help="directory to serve")
    s.add_argument("--host", "--bind", dest="host", default="127.0.0.1", help="address to listen on")
    s.add_argument("--port", type=int, default=2121, help="port (0: any free port)")
    s.add_argument("--user")
    s.add_argument("--password")
    s.add_argument("--users", metavar="FILE", help="users file with hashed passwords (drsftp passwd)")
    s.add_argument("--anonymous-read", action="store_true", help="allow anonymous download (never upload)")
    s.add_argument("--idle-timeout", type=float, default=300.0, help="seconds a session may idle")
    s.add_argument("--data-timeout", type=float, default=120.0, help="seconds a transfer may stall")
    s.add_argument("--read-only", action="store_true", help="no uploads or changes")
    s.add_argument("--tuning", type=_tuning_arg, default="drs")
    s.add_argument("--force-buffers", action="store_true")
    s.add_argument("--passive-ports", metavar="LO-HI")
    s.add_argument("--max-connections", type=int, default=256)
    s.add_argument("--max-connections-per-ip", type=int, default=32)
    s.add_argument("--log-file", metavar="FILE")
    s.add_argument("--tls-cert", metavar="FILE", help="certificate (PEM) for FTPS: AUTH TLS, PROT P")
    s.add_argument("--tls-key", metavar="FILE", help="private key (PEM; default: in --tls-cert)")
    s.add_argument("--require-tls", action="store_true", help="refuse plain-text login and data")
    s.add_argument("--grace", type=float, default=30.0,
                   help="on SIGTERM, seconds running transfers may take before they are aborted")
    s.add_argument("--buffer-budget", default="256MiB",
                   help="socket buffers of all transfers together (DRS shares it by need); 'off':"
                        " no budget, and DRS leaves buffers to kernel autotuning where it reaches further")

    from .client.jobcli import add_dataset_opts, add_ls_parser

    for name, helptext, paths in (("get", "download ftp://... to DEST", "URL ... [DEST]"),
                                  ("put", "upload SRC to ftp://...", "SRC ... URL")):
        p = sub.add_parser(name, help=helptext)
        p.add_argument("paths", nargs="+", metavar="PATH", help=paths)
        _add_transfer_opts(p)
        add_dataset_opts(p)
    add_ls_parser(sub)

    pw = sub.add_parser("passwd", help="add, change or delete a user in a users file")
    pw.add_argument("file")
    pw.add_argument("name")
    pw.add_argument("--home", help="the user's home (default: the server's --root)")
    pw.add_argument("--read-only", action="store_true", help="download only")
    pw.add_argument("--password-stdin", action="store_true", help="read the password from stdin")
    pw.add_argument("--delete", action="store_true")

    from .netem.cli import add_parser as add_netem
    from .bench.cli import add_parser as add_bench

    add_netem(sub)
    add_bench(sub)
    return parser


def _setup_logging(verbose: int, log_file: str | None = None) -> None:
    level = logging.WARNING - 10 * min(verbose, 2)
    handlers: list[logging.Handler] = [logging.StreamHandler(sys.stderr)]
    if log_file:
        handlers.append(logging.FileHandler(log_file))
    logging.basicConfig(level=level, format="drsftp: %(message)s", handlers=handlers)
    logging.getLogger("pyftpdlib").setLevel(logging.WARNING if verbose < 2 else logging.DEBUG)


def _size_arg(text: str, what: str) -> int:
    from .tuning import parse_size

    try:
        return parse_size(text)
    except ValueError as exc:
        raise UsageError(f"{what}: {exc}") from exc


def _budget_arg(text: str) -> int | None:
    return None if text.strip().lower() == "off" else _size_arg(text, "--buffer-budget")


def _cmd_serve(args) -> int:
    from .server import ServerConfig, serve
    from .server.app import parse_port_range

    if args.log_file:
        try:
            open(args.log_file, "a").close()
        except OSError as exc:
            raise UsageError(f"cannot write log file {args.log_file}: {exc.strerror}") from exc
    if args.users and not os.path.exists(args.users):
        raise UsageError(f"users file not found: {args.users}")
    cfg = ServerConfig(
        root=args.root, user=args.user, password=args.password, host=args.host, port=args.port,
        tuning=args.tuning, force_buffers=args.force_buffers,
        passive_ports=parse_port_range(args.passive_ports) if args.passive_ports else None,
        anonymous_read=args.anonymous_read, max_cons=args.max_connections,
        max_cons_per_ip=args.max_connections_per_ip, write_perm=not args.read_only,
        buffer_budget=_budget_arg(args.buffer_budget), grace=args.grace,
        users_file=args.users, idle_timeout=args.idle_timeout, data_timeout=args.data_timeout,
        tls_cert=args.tls_cert, tls_key=args.tls_key, require_tls=args.require_tls,
    )
    return serve(cfg)


def _cmd_passwd(args) -> int:
    import getpass

    from .server.users import NAME_RE, READ_PERM, WRITE_PERM, UserEntry, hash_password, write_user

    if not NAME_RE.match(args.name):
        raise UsageError("user names are 1-64 letters, digits, '.', '_' or '-'")
    if args.delete:
        write_user(args.file, UserEntry(args.name, "", "", ""), delete=True)
        print(f"deleted {args.name} from {args.file}")
        return 0
    if args.password_stdin:
        password = sys.stdin.readline().rstrip("\n")
    else:
        password = getpass.getpass(f"password for {args.name}: ")
        if getpass.getpass("again: ") != password:
            raise UsageError("the passwords differ")
    if len(password) < 8:
        raise UsageError("use a password of at least 8 characters")
    home = args.home or "."
    write_user(args.file, UserEntry(args.name, hash_password(password), home,
                                    READ_PERM if args.read_only else WRITE_PERM))
    print(f"{args.name} written to {args.file} (home {home})")
    return 0


def _cmd_transfer(args) -> int:
    from .client import TransferOptions, get, put
    from .client.jobcli import run_job, wants_job
    from .client.progress import human_bits, human_bytes
    from .ftp.session import parse_url

    if args.command == "put" and len(args.paths) < 2:
        raise UsageError("put needs SRC and URL")
    if not wants_job(args):
        args.url = args.paths[0] if args.command == "get" else args.paths[1]
        args.dest = args.paths[1] if args.command == "get" and len(args.paths) > 1 else None
        args.src = args.paths[0]
    opts = TransferOptions(
        tuning=args.tuning, force_buffers=args.force_buffers, resume=args.resume,
        progress={"auto": None, "always": True, "never": False}[args.progress],
        use_drs_command=not args.no_drs_command, idle_timeout=args.timeout, max_time=args.max_time,
        verify=args.verify,
    )
    if wants_job(args):
        return run_job(args, opts)
    loc = parse_url(args.url, args.netrc)
    from .client.transfer import with_retries

    if args.retries < 0:
        raise UsageError("--retries must be 0 or more")
    if args.command == "get":
        dest = args.dest or os.path.basename(loc.path)
        if os.path.isdir(dest):
            dest = os.path.join(dest, os.path.basename(loc.path))
        run = lambda o: get(loc, dest, o)  # noqa: E731
    else:
        run = lambda o: put(args.src, loc, o)  # noqa: E731

    def on_retry(attempt, delay, exc):
        print(f"drsftp: {exc}; retry {attempt}/{args.retries} in {delay:g} s", file=sys.stderr)

    result = asyncio.run(with_retries(run, opts, args.retries, on_retry=on_retry))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result.as_dict(), f, indent=1)
    if sys.stderr.isatty() or args.verbose:
        s = result.summary
        print(f"{args.command}: {human_bytes(result.bytes)} in {result.seconds:.2f} s = "
              f"{human_bits(result.mbps * 1e6)}; rtt {s.get('rtt_avg_ms')} ms; "
              f"DRS peer: {'yes' if result.drs_peer else 'no'}", file=sys.stderr)
    if not result.complete:
        print(f"drsftp: stopped after --max-time {args.max_time:g} s; --continue resumes", file=sys.stderr)
        return 28
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    _setup_logging(args.verbose, getattr(args, "log_file", None))
    from .client.control import FTPError
    from .client.jobcli import JobUsageError
    from .ftp.session import URLError
    from .netem.errors import NetemError
    from .server import ConfigError

    try:
        if args.command == "serve":
            return _cmd_serve(args)
        if args.command in ("get", "put"):
            return _cmd_transfer(args)
        if args.command == "passwd":
            return _cmd_passwd(args)
        if args.command == "ls":
            from .client.jobcli import run_ls

            return run_ls(args)
        return args.func(args)
    except KeyboardInterrupt:
        print("drsftp: interrupted", file=sys.stderr)
        return 130
    except (UsageError, URLError, ConfigError, JobUsageError) as exc:
        print(f"drsftp: error: {exc}", file=sys.stderr)
        return 2
    except (FTPError, NetemError, OSError, ValueError) as exc:
        print(f"drsftp: error: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
