"""`drsftp get/put/ls` with an ``https://`` or ``http://`` URL: the options
the FTP forms take, where they mean something over HTTP (docs/HTTP.md,
"Client").  Errors are HTTPErrors (FTPErrors: one sentence, exit 1)."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import posixpath
import sys
from collections.abc import Awaitable
from typing import TYPE_CHECKING

from ...http.url import HTTPLocation, is_http_url, parse_http_url
from ...tuning import Role

if TYPE_CHECKING:
    from ..result import TransferResult
    from ..transfer.options import TransferOptions
    from .preconnect import Early

FTP_ONLY = {"delete": "--delete", "checksum": "--checksum", "tls": "--tls", "pasv_address": "--pasv-address"}


def locate(url: str, netrc_file: str | None) -> HTTPLocation:
    from ..session.credentials import netrc_lookup

    return parse_http_url(url, netrc_lookup(netrc_file))


def http_command(args: argparse.Namespace) -> int | None:
    """Run get, put or ls when its URL is an HTTP one; None otherwise (the
    FTP client's: nothing of aiohttp is imported for it)."""
    if args.command == "ls":
        if not is_http_url(args.url):
            return None
        from ..transfer.options import TransferOptions

        opts = TransferOptions(idle_timeout=args.timeout, ca_file=args.ca_file, insecure=args.insecure)
        from .ls import run_ls

        return asyncio.run(run_ls(locate(args.url, args.netrc), opts, args.long))
    paths = args.paths
    if not any(is_http_url(p) for p in paths):
        return None
    return _transfer(args, paths)


def _transfer(args: argparse.Namespace, paths: list[str]) -> int:
    from ..transfer.attempts import with_retries
    from ..transfer.options import TransferOptions
    from ..transfer.targets import get_dest, put_url
    from ..trees.job.cli import JobUsageError, check_json_path

    for key, flag in FTP_ONLY.items():
        if getattr(args, key, False):
            raise JobUsageError(f"{flag} is not supported with https:// URLs yet")
    if len(paths) > 2 or (args.command == "put" and len(paths) < 2):
        raise JobUsageError(f"{args.command} over HTTP takes one file: "
                            + ("URL [DEST]" if args.command == "get" else "SRC URL"))
    if args.retries < 0:
        raise JobUsageError("--retries must be 0 or more")
    check_json_path(args.json)
    progress = {"auto": None, "always": True, "never": False}[args.progress]
    opts = TransferOptions(tuning=args.tuning, force_buffers=args.force_buffers, resume=args.resume,
                           progress=False if args.quiet else progress, use_drs_command=not args.no_drs_command,
                           idle_timeout=args.timeout, max_time=args.max_time, verify=args.verify,
                           ca_file=args.ca_file, insecure=args.insecure)
    streams = args.parallel  # None: auto
    if args.recursive or args.sync:
        return _tree(args, paths, opts, streams)
    if args.command == "get":
        loc = locate(paths[0], args.netrc)
        name = posixpath.basename(loc.path)
        if name in ("", ".", ".."):
            raise JobUsageError(f"{loc.shown} names a directory, not a file; drop the trailing '/'")
        dest = get_dest(paths[1] if len(paths) > 1 else None, loc.path)
        if os.path.lexists(dest) and not os.path.isfile(dest):
            raise JobUsageError(f"{dest} exists and is not a regular file; give a file's path")
        early = _early(loc, opts, Role.RECEIVER, streams)
        from .get import get

        def run(o: TransferOptions) -> Awaitable[TransferResult]:
            return get(loc, dest, o, streams, early)
    else:
        src = paths[0]
        if is_http_url(src):
            raise JobUsageError("put takes a local SRC and an https:// URL")
        if not os.path.isfile(src):
            raise JobUsageError(f"{src} is not a regular file; give a file (or -r for a directory)")
        loc = locate(put_url(src, paths[1]), args.netrc)
        early = _early(loc, opts, Role.SENDER, streams)
        from .put import put

        def run(o: TransferOptions) -> Awaitable[TransferResult]:
            return put(src, loc, o, streams, early)

    def on_retry(attempt: int, delay: float, exc: Exception) -> None:
        print(f"drsftp: {exc}; retry {attempt}/{args.retries} in {delay:g} s", file=sys.stderr)

    try:
        result = asyncio.run(with_retries(run, opts, args.retries, on_retry=on_retry))
    finally:
        if early is not None:
            early.close()
    return report(args, result)


def _early(loc: HTTPLocation, opts: TransferOptions, role: Role, streams: int | None) -> Early | None:
    """The first connection begun, then aiohttp imported while its
    handshake runs (preconnect.py, aiolib.py)."""
    from . import aiolib
    from .auto import pool_size
    from .preconnect import begin

    early = begin(loc, opts, role, pool_size(streams))
    aiolib.load()
    return early


def _tree(args: argparse.Namespace, paths: list[str], opts: TransferOptions, streams: int | None) -> int:
    from ..trees.job.cli import JobUsageError
    from .tree import TreeJob, get_tree, put_tree

    if not args.recursive:
        raise JobUsageError("--sync goes with -r over HTTP")
    if len(paths) != 2:
        wanted = "URL DEST" if args.command == "get" else "SRC URL"
        raise JobUsageError(f"{args.command} -r over HTTP takes {wanted}")
    job = TreeJob(sessions=args.sessions, streams=streams or 1, sync=args.sync)  # (sessions None: -c auto, tree.py)
    if args.command == "get":
        if is_http_url(paths[1]):
            raise JobUsageError("get writes to a local DEST, not a URL")
        result = asyncio.run(get_tree(locate(paths[0], args.netrc), paths[1], opts, job))
    else:
        if not os.path.isdir(paths[0]):
            raise JobUsageError(f"{paths[0]} is not a directory; put -r takes one")
        result = asyncio.run(put_tree(paths[0], locate(paths[1], args.netrc), opts, job))
    return report(args, result)


def report(args: argparse.Namespace, result: TransferResult, stopped: str = "--continue resumes") -> int:
    """A get's, put's or copy's end, over FTP (drsftp/cli.py) or HTTP:
    --json's file, the summary line, and the exit status (28: --max-time
    ran out; ``stopped`` says what then)."""
    from ..session.control import FTPError, os_reason

    if args.json:
        try:
            with open(args.json, "w") as f:
                json.dump(result.to_dict(), f, indent=1)
        except OSError as exc:
            raise FTPError(f"cannot write {args.json}: {os_reason(exc)}", transient=False) from exc
    if not args.quiet:
        print(result.summary_line(), file=sys.stderr)
    if not result.complete:
        print(f"drsftp: stopped after --max-time {args.max_time:g} s; {stopped}", file=sys.stderr)
        return 28
    return 0

