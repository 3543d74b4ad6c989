"""The `drsftp` command line.  Every failure is one sentence on stderr and a
non-zero exit: 1 for a failed operation, 2 for bad usage, 28 for a transfer
stopped at --max-time, 130 for Ctrl-C."""

from __future__ import annotations

import argparse
import logging
import os
import posixpath
import re
import sys
from typing import TYPE_CHECKING, NoReturn

from . import __version__
from .ftp.eblock import MAX_STREAMS

if TYPE_CHECKING:
    from collections.abc import Awaitable

    from .client import TransferResult

DESCRIPTION = ("drsftp moves files over FTP, right-sizing TCP buffers to the path while the transfer runs "
               "(Dynamic Right-Sizing).")


class UsageError(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    """A usage error is one line, the sentence and where to read more, not
    the usage block (README, "Errors"); exit 2.  Sub-parsers inherit the class."""

    # the command's help, for errors the top parser reports about its
    # arguments (argparse leaves unrecognized arguments to the top parser)
    help_of: str | None = None

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"drsftp: error: {message}; see {self.help_of or self.prog} --help\n")


def _tuning_arg(text: str) -> str:
    from .tuning import check_spec

    try:
        return check_spec(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from exc


def _add_transfer_opts(p: argparse.ArgumentParser) -> None:
    from .client.trees.job.cli import add_tls_opts, parallel_arg, seconds_arg
    from .tuning import names

    p.add_argument("--tuning", type=_tuning_arg, default="drs",
                   help=f"buffer tuning: {', '.join(names())} (fixed:SIZE, drs:CAP); default drs")
    p.add_argument("--continue", dest="resume", action="store_true", help="resume with REST")
    p.add_argument("--json", metavar="FILE", help="write the transfer's figures and timeline as JSON")
    p.add_argument("--force-buffers", action="store_true",
                   help="use SO_RCVBUFFORCE/SO_SNDBUFFORCE (CAP_NET_ADMIN) past rmem_max/wmem_max")
    p.add_argument("--no-drs-command", action="store_true",
                   help="never send the DRS command (right-size this end alone)")
    p.add_argument("--progress", choices=("auto", "always", "never"), default="auto",
                   help="live progress bar on stderr (auto: when stderr is a terminal)")
    p.add_argument("-q", "--quiet", action="store_true",
                   help="print nothing on success (no result line, no progress bar)")
    p.add_argument("--netrc", metavar="FILE", help="credentials file (default ~/.netrc)")
    p.add_argument("--timeout", type=seconds_arg, default=60.0,
                   help="seconds a stalled transfer may last (default 60)")
    p.add_argument("--retries", type=int, default=0, metavar="N",
                   help="after a dropped connection or 4xx reply, reconnect and resume up to N times (default 0)")
    p.add_argument("--verify", action="store_true",
                   help="compare SHA-256 with the server's HASH afterwards (non-zero exit if different)")
    p.add_argument("--max-time", type=seconds_arg, metavar="SECONDS",
                   help="stop after this long (ABOR), keep what arrived, exit 28 (as curl)")
    add_tls_opts(p)
    p.add_argument("-P", "--parallel", type=parallel_arg, default="1", metavar="N|auto",
                   help=f"data streams, 1-{MAX_STREAMS}, or 'auto' (chosen and changed while the transfer runs):"
                        " extended block mode where the server lists PARALLEL (over TLS too), else"
                        " for a get N sessions on byte ranges (a put then runs one stream); default 1;"
                        " in a job (-r, several files): streams per session, files of 64 MiB or more -P auto")


# commands whose parsers import the bench and the emulator (~50 ms): built
# only when one of them runs, or for the full help
HEAVY = ("netem", "bench", "datapath", "benchreport", "netemcheck")
_LIGHT = ("serve", "get", "put", "copy", "ls", "passwd")
COMMANDS = _LIGHT + HEAVY
_VERBOSE_AFTER = "verbose_after_"  # -v given after a command: dest prefix, one per depth


def _add_global_opts(parser: argparse.ArgumentParser, depth: int = 0) -> None:
    """--version and -v, on the top parser and every command's (`drsftp
    serve -v` as `drsftp -v serve`).  A command's parser counts its -v
    apart: argparse gives it a namespace of its own."""
    parser.add_argument("--version", action="version", version=f"drsftp {__version__}",
                        help="print the version and exit")
    parser.add_argument("-v", "--verbose", action="count",
                        dest="verbose" if depth == 0 else f"{_VERBOSE_AFTER}{depth}",
                        default=0 if depth == 0 else argparse.SUPPRESS,
                        help="log more on stderr (-vv: also pyftpdlib's debug log)")
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                _add_global_opts(sub, depth + 1)


def _verbosity(args: argparse.Namespace) -> int:
    return args.verbose + sum(v for k, v in vars(args).items() if k.startswith(_VERBOSE_AFTER))


def build_parser(command: str | None = None) -> _Parser:
    """The whole parser; with ``command`` (the one being run) the heavy
    parsers of other commands are left out, though the usage line still
    names every command."""
    parser = _Parser(prog="drsftp", description=DESCRIPTION)
    sub = parser.add_subparsers(dest="command", required=True, metavar="{" + ",".join(COMMANDS) + "}")

    from .server.cli import add_passwd_parser, add_serve_parser

    add_serve_parser(sub, _tuning_arg)
    from .client.trees.job.cli import add_dataset_opts, add_ls_parser

    for name, helptext, paths in (("get", "download ftp:// or https://... to DEST", "URL ... [DEST]"),
                                  ("put", "upload SRC to ftp:// or https://...", "SRC ... URL")):
        p = sub.add_parser(name, help=helptext)
        p.add_argument("paths", nargs="+", metavar="PATH", help=paths)
        _add_transfer_opts(p)
        add_dataset_opts(p)
    c = sub.add_parser("copy", help="copy between two servers (third-party: FTP, or HTTP COPY), or get/put"
                                    " with one local side")
    c.add_argument("paths", nargs=2, metavar="PATH", help="SRC DST (ftp:// or https:// URLs; one of them may be local)")
    _add_transfer_opts(c)
    add_dataset_opts(c)
    from .client.thirdparty.cli import add_copy_opts

    add_copy_opts(c)
    add_ls_parser(sub)

    add_passwd_parser(sub)

    if command is None or command in HEAVY:
        from .bench.cli import add_parser as add_bench
        from .netem.cli import add_parser as add_netem

        add_netem(sub)
        add_bench(sub)
    _add_global_opts(parser)
    return parser


def _setup_logging(verbose: int, log_file: str | None = None) -> None:
    level = logging.WARNING - 10 * min(verbose, 2)
    handlers: list[logging.Handler] = [logging.StreamHandler(sys.stderr)]
    if log_file:
        handlers.append(logging.FileHandler(log_file))
    logging.basicConfig(level=level, format="drsftp: %(message)s", handlers=handlers)
    logging.getLogger("pyftpdlib").setLevel(logging.WARNING if verbose < 2 else logging.DEBUG)


def _cmd_transfer(args: argparse.Namespace) -> int:
    from .client import TransferOptions, get, put
    from .client.http.cli import report
    from .client.session.credentials import locate
    from .client.trees.job.cli import check_json_path, run_job, wants_job

    if args.command == "put" and len(args.paths) < 2:
        raise UsageError("put needs SRC and URL")
    if not wants_job(args):
        args.url = args.paths[0] if args.command == "get" else args.paths[1]
        args.dest = args.paths[1] if args.command == "get" and len(args.paths) > 1 else None
        args.src = args.paths[0]
    progress = {"auto": None, "always": True, "never": False}[args.progress]
    opts = TransferOptions(
        tuning=args.tuning, force_buffers=args.force_buffers, resume=args.resume,
        progress=False if args.quiet else progress,
        use_drs_command=not args.no_drs_command, idle_timeout=args.timeout, max_time=args.max_time,
        verify=args.verify, tls=args.tls, ca_file=args.ca_file, insecure=args.insecure,
        pasv_address=args.pasv_address,
    )
    if wants_job(args):
        return run_job(args, opts)
    from .client.transfer.targets import get_dest, put_url

    loc = locate(args.url if args.command == "get" else put_url(args.src, args.url), args.netrc)
    from .client.streams import parallel
    from .client.transfer.attempts import with_retries

    if args.retries < 0:
        raise UsageError("--retries must be 0 or more")
    streams = args.parallel  # (-P parsed by argparse: None is auto)
    check_json_path(args.json)
    if args.command == "get":
        name = posixpath.basename(loc.path)
        if name in ("", ".", ".."):
            raise UsageError(f"{loc.path} names a directory, not a file: drop the trailing "
                             f"{name or '/'!r} or use -r")
        dest = get_dest(args.dest, loc.path)
        if os.path.lexists(dest) and not os.path.isfile(dest):
            raise UsageError(f"{dest} exists and is not a regular file; give a file's path")

        def run(o: TransferOptions) -> Awaitable[TransferResult]:
            return get(loc, dest, o) if streams == 1 else parallel.get(loc, dest, o, streams)
    else:
        if os.path.exists(args.src) and not os.path.isfile(args.src) and not os.path.isdir(args.src):
            raise UsageError(f"{args.src} is not a regular file (a pipe or a device); give a file")

        def run(o: TransferOptions) -> Awaitable[TransferResult]:
            return put(args.src, loc, o) if streams == 1 else parallel.put(args.src, loc, o, streams)

    def on_retry(attempt, delay, exc):
        print(f"drsftp: {exc}; retry {attempt}/{args.retries} in {delay:g} s", file=sys.stderr)

    import asyncio

    result = asyncio.run(with_retries(run, opts, args.retries, on_retry=on_retry))
    return report(args, result)


def _cmd_copy(args: argparse.Namespace) -> int:
    """`copy`: between two servers a third-party transfer; with one local
    side exactly `get` or `put` (docs/THIRDPARTY.md)."""
    from .client.thirdparty.cli import one_local_side, run_copy

    command = one_local_side(args)
    if command is None:
        return run_copy(args)
    args.command = command
    return _cmd_transfer(args)


def _command_word(argv: list[str]) -> tuple[str | None, bool]:
    """The command (the first word that is not an option: the top-level
    options take no value), and whether -h, --help or --version precede it."""
    for arg in argv:
        if arg in ("-h", "--help", "--version"):
            return None, True
        if not arg.startswith("-"):
            return arg, False
    return None, False


def parse_args(argv: list[str]) -> argparse.Namespace:
    command, top_option = _command_word(argv)
    parser = build_parser(command if command in _LIGHT else None)  # else the whole parser, for its help
    if command is None and not top_option:
        parser.error(f"give a command: {', '.join(COMMANDS)}")
    if command is not None and command not in COMMANDS:
        parser.error(f"unknown command {command!r} (commands: {', '.join(COMMANDS)})")
    if command is not None:
        parser.help_of = f"drsftp {command}"
        if command == "bench":  # (its modes' options are their own: name the mode's help)
            from .bench.cli import MODES

            mode = next((a for a in argv[argv.index(command) + 1:] if not a.startswith("-")), None)
            if mode in MODES:
                parser.help_of += f" {mode}"
    args = parser.parse_args(argv)
    args.verbose = _verbosity(args)
    return args


_URL_SCHEME = re.compile(r"(?i)^(ftps?|https?):")


def _role(command: str, i: int, n: int) -> str:
    """What the ``i``-th of ``n`` paths of a get, put or copy is."""
    last = i == n - 1 and n > 1
    if command == "copy":
        return "DST" if last else "SRC"
    if command == "put":
        return "URL" if last else "SRC"
    return "DEST" if last else "URL"


def check_paths(command: str, paths: list[str]) -> None:
    """Before anything moves: no path is empty, and a path that starts with
    ``ftp:``, ``ftps:``, ``http:`` or ``https:`` is a URL, even mistyped
    (``ftp:/host``): its parser says what is wrong rather than a local file
    or directory of that name being read or made (with the password in its
    name).  A put uploads local files: a URL as its SRC is refused (between
    two servers: copy)."""
    from .ftp.url import parse_url, without_password
    from .http.url import parse_http_url

    for i, path in enumerate(paths):
        if not path:
            raise UsageError(f"{_role(command, i, len(paths))} is empty")
        if m := _URL_SCHEME.match(path):
            if not path[m.end():].startswith("//"):  # (a whole URL is parsed where it is used)
                (parse_http_url if m.group(1).lower().startswith("http") else parse_url)(path)
            if command == "put" and i < len(paths) - 1:
                raise UsageError(f"put uploads local files, and SRC {without_password(path)!r} is a URL"
                                 " (between two servers: drsftp copy)")


def main(argv: list[str] | None = None) -> int:
    """The entry point: Ctrl-C anywhere in it, the lazy imports and the
    parser's making too, is "interrupted" and 130, never a traceback."""
    try:
        return _main(argv)
    except KeyboardInterrupt:
        print("drsftp: interrupted", file=sys.stderr)
        return 130


def _main(argv: list[str] | None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    _setup_logging(args.verbose)  # (serve adds its log file: drsftp.server.ops.translog)
    from .client.session.control import FTPError
    from .client.trees.job.cli import JobUsageError
    from .ftp.url import URLError
    from .netem.errors import NetemError, NetemUsageError
    from .server.config import ConfigError

    try:
        if args.command in ("get", "put", "copy"):
            check_paths(args.command, args.paths)
        from .client.http.cli import http_command  # (https:// URLs: docs/HTTP.md, "Client")
        if args.command in ("get", "put", "ls") and (code := http_command(args)) is not None:
            return code
        if args.command == "serve":
            from .server.cli import cmd_serve

            return cmd_serve(args)
        if args.command in ("get", "put"):
            return _cmd_transfer(args)
        if args.command == "copy":
            return _cmd_copy(args)
        if args.command == "passwd":
            from .server.cli import cmd_passwd

            return cmd_passwd(args)
        if args.command == "ls":
            from .client.trees.job.cli import run_ls

            return run_ls(args)
        return args.func(args)
    except KeyboardInterrupt:
        print("drsftp: interrupted", file=sys.stderr)
        return 130
    except (UsageError, URLError, ConfigError, JobUsageError, NetemUsageError) as exc:
        print(f"drsftp: error: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"drsftp: error: {_os_error_sentence(exc)}", file=sys.stderr)
        return 1
    except (FTPError, NetemError, ValueError) as exc:
        print(f"drsftp: error: {exc}", file=sys.stderr)
        return 1


def _os_error_sentence(exc: OSError) -> str:
    """"cannot use /x/y: permission denied", not "[Errno 13] Permission denied: '/x/y'"."""
    from .client.session.control import os_reason

    name = exc.filename if isinstance(exc.filename, str) else None
    return f"cannot use {name}: {os_reason(exc)}" if name else os_reason(exc)


if __name__ == "__main__":
    sys.exit(main())
