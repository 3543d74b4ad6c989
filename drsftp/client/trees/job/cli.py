"""The command line of dataset jobs: `get`/`put` with -r, several sources,
--sync, -c; and `ls` (docs/DATASETS.md, "Usage").  drsftp.cli hands these
over here."""

from __future__ import annotations

import argparse
import asyncio
import logging
import math
import os
import sys
import time
import urllib.parse

from ....ftp.eblock import parse_parallel
from ....ftp.listing import DIR, LINK
from ....ftp.url import FTPLocation
from ...session.credentials import locate


class JobUsageError(ValueError):
    pass


DEFAULT_STREAMS = 1  # -P for a job: streams per session on cached data channels


def _sessions_arg(text: str) -> int | None:
    if text == "auto":
        return None
    try:
        n = int(text)
    except ValueError:
        n = 0
    if not 1 <= n <= 64:
        raise argparse.ArgumentTypeError("-c takes 1-64 or auto")
    return n


def parallel_arg(text: str) -> int | None:
    """-P N|auto for get, put and copy, parsed once (ftp.eblock.parse_parallel): None is auto."""
    try:
        return parse_parallel(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from exc


def seconds_arg(text: str) -> float:
    """A time limit: a finite number of seconds above 0."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"want a number of seconds above 0, not {text!r}")
    return value


def check_json_path(path: str | None) -> None:
    """--json's file can be written, checked before the transfer (a result
    that cannot be recorded should not cost the transfer first)."""
    if path is None:
        return
    folder = os.path.dirname(os.path.abspath(path))
    if os.path.isdir(path):
        raise JobUsageError(f"--json {path} is a directory; give a file's path")
    if not os.path.isdir(folder):
        why = "not a directory" if os.path.exists(folder) else f"no such directory {folder}"
        raise JobUsageError(f"cannot write --json {path}: {why}")
    if not os.access(path if os.path.exists(path) else folder, os.W_OK):
        raise JobUsageError(f"cannot write --json {path}: permission denied")


def add_dataset_opts(p: argparse.ArgumentParser) -> None:
    p.add_argument("-r", "--recursive", action="store_true", help="copy directories and what they hold")
    p.add_argument("-c", "--sessions", type=_sessions_arg, default=None, metavar="N",
                   help="sessions moving different files at once (1-64, or auto: chosen from measured goodput,"
                        " starting at up to 16); never more than the files waiting; default auto")
    add_switches(p, {
        "--sync": "skip files the destination holds complete (same size, not older)",
        "--checksum": "with --sync: compare SHA-256 (HASH) of same-size files instead of times",
        "--delete": "delete what the destination holds beyond the source (only with this flag)",
    })
    p.add_argument("--no-pipeline", dest="pipeline", action="store_false",
                   help="send each command after the previous reply (to measure what pipelining saves)")
    p.add_argument("--stream-mode", dest="cached", action="store_false",
                   help="gets in stream mode (a data connection per file) even where the server offers"
                        " extended block mode's cached data channels")


def add_ls_parser(sub) -> None:
    p = sub.add_parser("ls", help="list a directory on an FTP server (MLSD, or LIST)")
    p.add_argument("url", help="ftp://[user[:password]@]host[:port]/dir/")
    p.add_argument("-l", "--long", action="store_true", help="type, size and time of each entry")
    p.add_argument("--netrc", metavar="FILE", help="credentials file (default ~/.netrc)")
    p.add_argument("--timeout", type=seconds_arg, default=60.0, help="seconds to wait for the server (default 60)")
    add_tls_opts(p)


def add_tls_opts(p: argparse.ArgumentParser) -> None:
    add_switches(p, {
        "--tls": "FTPS: AUTH TLS, then control and data encrypted (ftps:// URLs: implicit TLS)",
        "--insecure": "do not check the server's TLS certificate or name (says so on stderr)",
        "--pasv-address": "open data connections to the address PASV names (a server's separate data"
                          " interface) rather than to the control connection's host",
    })
    p.add_argument("--ca-file", metavar="FILE",
                   help="trust the CA certificates in FILE (PEM) instead of the system store")


def add_switches(p: argparse.ArgumentParser, switches: dict[str, str]) -> None:
    """Options that are off unless given (``--flag``: its help)."""
    for flag, text in switches.items():
        p.add_argument(flag, action="store_true", help=text)


def wants_job(args) -> bool:
    two_urls = args.command == "get" and len(args.paths) == 2 and _is_url(args.paths[1])
    return bool(args.recursive or len(args.paths) > 2 or args.sync or args.delete
                or not args.pipeline or two_urls)


def _is_url(text: str) -> bool:
    return text.startswith(("ftp://", "ftps://"))


def parse_src_url(url: str, netrc: str | None) -> tuple[FTPLocation, bool]:
    """A source URL; a trailing slash means 'the directory's contents'.
    ftp://host/ names the login directory."""
    parts = urllib.parse.urlsplit(url)
    if parts.scheme in ("ftp", "ftps") and parts.path in ("", "/"):
        url = urllib.parse.urlunsplit(parts._replace(path="/."))
    return locate(url, netrc), url.endswith(("/", "/."))


class _Once(logging.Filter):
    """Each distinct message once: a job tunes hundreds of data connections
    and would repeat the same host note for each."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: set[str] = set()

    def filter(self, record: logging.LogRecord) -> bool:
        msg = record.getMessage()
        if msg in self.seen:
            return False
        self.seen.add(msg)
        return True


def run_job(args, topts) -> int:
    from ..dataset import JobOptions, run_get, run_put

    for name in ("drsftp.io.tuner", "drsftp.client"):
        logging.getLogger(name).addFilter(_Once())

    check_json_path(args.json)
    if args.checksum and not args.sync:
        raise JobUsageError("--checksum goes with --sync")
    if args.delete and not args.recursive:
        raise JobUsageError("--delete goes with -r: it removes what a directory's copy holds beyond its source")
    if args.retries < 0:
        raise JobUsageError("--retries must be 0 or more")
    if len(args.paths) < 2:
        raise JobUsageError(f"{args.command} needs a source and a destination")
    wanted = args.parallel  # (-P parsed by argparse: None is auto)
    streams = DEFAULT_STREAMS if wanted is None else wanted
    jopts = JobOptions(recursive=args.recursive, sync=args.sync, checksum=args.checksum, delete=args.delete,
                       resume=args.resume, sessions=args.sessions, pipeline=args.pipeline, retries=args.retries,
                       verbose=args.verbose, streams=streams, cached=args.cached, json=args.json,
                       progress=False if args.quiet else {"auto": None, "always": True, "never": False}[args.progress])
    *srcs, dest = args.paths
    if args.command == "get":
        urls = [parse_src_url(u, args.netrc) for u in srcs]
        first = urls[0][0]
        if any((u.host, u.port, u.user) != (first.host, first.port, first.user) for u, _ in urls):
            raise JobUsageError("all sources of one call must be on the same server and user")
        if _is_url(dest):
            raise JobUsageError("get writes to a local DEST, not a URL")
        result = asyncio.run(run_get(urls, dest, topts, jopts))
    else:
        if any(_is_url(s) for s in srcs):
            raise JobUsageError("put reads local files: the sources must not be URLs")
        loc, _ = parse_src_url(dest, args.netrc)
        result = asyncio.run(run_put(srcs, loc, topts, jopts))
    if args.json:
        result.write_json(args.json)
    failed = result.count("failed")
    if not args.quiet:  # (as a single file's result line: also when run from a script)
        print(result.summary_line(), file=sys.stderr)
    if failed:
        print(f"drsftp: error: {failed} of {result.entries} entries failed", file=sys.stderr)
    if result.stopped:
        print(f"drsftp: stopped after --max-time {args.max_time:g} s; --continue resumes", file=sys.stderr)
        return 28
    return 1 if failed else 0


def run_ls(args) -> int:
    from ...transfer.getput import TransferOptions
    from ..dataset import run_ls as ls

    loc, _ = parse_src_url(args.url, args.netrc)
    entries = asyncio.run(ls(loc, TransferOptions(idle_timeout=args.timeout, tls=args.tls, ca_file=args.ca_file,
                                                  insecure=args.insecure,
                                                  pasv_address=args.pasv_address)))
    for e in entries:
        name = e.name.encode("utf-8", "replace").decode("utf-8")
        if not args.long:
            print(name + ("/" if e.type == DIR else ""))
            continue
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(e.mtime)) if e.mtime is not None else "-"
        size = "-" if e.size is None or e.type == DIR else str(e.size)
        target = f" -> {e.target}" if e.type == LINK and e.target else ""
        print(f"{e.type:5} {size:>12} {when} {name}{target}")
    return 0
