"""`drsftp copy` with an https:// (or http://) URL (docs/HTTP.md, "drsftp
copy over HTTPS"): two of them make an HTTP third-party copy (copy.py,
tree.py), one ftp:// and one https:// go through this host (relay.py),
an https:// URL and a local path are a get or a put (client/http/cli.py).
Errors are HTTPErrors (one sentence, exit 1), usage errors exit 2."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import posixpath
import sys
import urllib.parse
from collections.abc import AsyncIterator
from dataclasses import replace
from typing import TYPE_CHECKING

from ....http.url import HTTPLocation, is_http_url
from ...result import TransferResult
from ...transfer.options import TransferOptions
from ..cli import report

if TYPE_CHECKING:
    from .copy import Ends, Settings

CANCELLED = "the server cancels a copy its client leaves"  # what a COPY stopped at --max-time leaves
# -c auto: COPYs at once in a tree.  A file costs a round trip of A-B before its first byte (B asks A only once the
# COPY came), so as many as the servers take from one address: drsftp serve's --max-connections-per-ip (32) less the
# walk's connections (PROPFIND, MKCOL); a server that takes fewer answers 503 and the tree goes on with fewer (tree.py).
# More (48, 60, the servers taking them) were no faster: the round trips are hidden at 30 (decision 0048)
SESSIONS = 30
FTP_ONLY = {"tls": "--tls", "pasv_address": "--pasv-address", "checksum": "--checksum", "sync": "--sync",
            "delete": "--delete", "resume": "--continue"}


def _is_ftp(text: str) -> bool:
    return text.lower().startswith(("ftp://", "ftps://"))


def dest_url(src: str, dst: str) -> str:
    """A DST ending in ``/`` names a directory: the file keeps its name there
    (as between ftp:// servers)."""
    if not dst.endswith("/"):
        return dst
    return dst + urllib.parse.quote(posixpath.basename(urllib.parse.urlsplit(src).path.rstrip("/")))


def run_http_copy(args: argparse.Namespace) -> int:
    from ...trees.job.cli import JobUsageError, check_json_path

    src, dst = args.paths
    if not (is_http_url(src) or _is_ftp(src)) or not (is_http_url(dst) or _is_ftp(dst)):
        if getattr(args, "push", False):
            raise JobUsageError("--push is for a copy between two https:// URLs")
        from ..cli import http_command

        args.command = "get" if is_http_url(src) else "put"
        code = http_command(args)
        assert code is not None  # (an https:// URL is among the paths)
        return code
    if args.retries < 0:
        raise JobUsageError("--retries must be 0 or more")
    check_json_path(args.json)
    progress = {"auto": None, "always": True, "never": False}[args.progress]
    opts = TransferOptions(tuning=args.tuning, force_buffers=args.force_buffers,
                           progress=False if args.quiet else progress,
                           use_drs_command=not args.no_drs_command, idle_timeout=args.timeout, max_time=args.max_time,
                           verify=args.verify, tls=args.tls, ca_file=args.ca_file, insecure=args.insecure,
                           pasv_address=args.pasv_address)
    if not (is_http_url(src) and is_http_url(dst)):
        return _relay(args, opts)
    for key, flag in FTP_ONLY.items():
        if getattr(args, key, False):
            why = " (the server starts a copy over)" if key == "resume" else ""
            raise JobUsageError(f"{flag} is not supported for copies between https:// URLs{why}")
    if args.tls_data != "private":
        raise JobUsageError("--tls-data is for copies between two ftp:// servers")
    from ..cli import locate

    if args.recursive:
        return _tree(args, opts, locate(src, args.netrc), locate(dst, args.netrc))
    s, d = locate(src, args.netrc), locate(dest_url(src, dst), args.netrc)
    for loc, what in ((s, "SRC"), (d, "DST")):
        if posixpath.basename(loc.path) in ("", ".", ".."):
            raise JobUsageError(f"{what} {loc.shown} names a directory, not a file: use -r for a tree")
    if (s.origin, s.path) == (d.origin, d.path):
        raise JobUsageError("SRC and DST are the same file")
    from ...transfer.attempts import with_retries

    def on_retry(attempt: int, delay: float, exc: Exception) -> None:
        print(f"drsftp: {exc}; retry {attempt}/{args.retries} in {delay:g} s", file=sys.stderr)

    result = asyncio.run(with_retries(lambda o: _one(args, o, s, d), opts, args.retries, on_retry=on_retry))
    return report(args, result, CANCELLED)


async def _one(args: argparse.Namespace, opts: TransferOptions, src: HTTPLocation, dst: HTTPLocation) -> TransferResult:
    from .copy import copy_file

    async with _ends(args, opts, src, dst, 2) as (ends, s):
        return await copy_file(ends, src.path, dst.path, s)


@contextlib.asynccontextmanager
async def _ends(args: argparse.Namespace, opts: TransferOptions, src: HTTPLocation, dst: HTTPLocation,
                connections: int) -> AsyncIterator[tuple[Ends, Settings]]:
    """The two pools (a session each, their logins) and the copy's settings."""
    from ....tuning import Role
    from ...transfer import maxtime
    from ..pool import Pool
    from .copy import Ends, Settings, stream_timeout
    from .tokens import READ, WRITE, RemoteAuth, validity

    o = maxtime.started(replace(opts, use_drs_command=False))  # (no data on these connections: no DRS)
    push = args.push
    wait = replace(o, idle_timeout=stream_timeout(args.timeout))  # (the COPY's pool: the marker wait speaks first)
    async with Pool(src, wait if push else o, Role.RECEIVER, connections, timeline=False) as sp, \
            Pool(dst, o if push else wait, Role.RECEIVER, connections, timeline=False) as dp:
        remote = dp if push else sp
        auth = RemoteAuth(remote, remote.loc.path, WRITE if push else READ, validity(args.max_time))
        s = Settings(args.parallel, args.verify, args.timeout, deadline=o.deadline, progress=opts.progress)
        yield Ends(sp, dp, push, auth), s


def _tree(args: argparse.Namespace, opts: TransferOptions, src: HTTPLocation, dst: HTTPLocation) -> int:
    """-r: without a trailing / the source directory itself goes into DST
    (as get -r and put -r, and FTP's trees)."""
    from .tree import copy_tree

    src_top = src.path.rstrip("/") or "/"
    dst_top = dst.path.rstrip("/")
    if not src.path.endswith("/") and src_top != "/":
        dst_top = f"{dst_top}/{posixpath.basename(src_top)}"
    sessions = args.sessions or SESSIONS

    async def run():
        async with _ends(args, opts, src.at(src_top), dst.at(dst_top or "/"), sessions + 2) as (ends, s):
            return await copy_tree(ends, src_top if src_top != "/" else "", dst_top, s, sessions)

    out = asyncio.run(run())
    code = report(args, out.result, CANCELLED)
    for path, why in out.failed:
        print(f"drsftp: error: {path}: {why}", file=sys.stderr)
    if out.failed:
        print(f"drsftp: error: {len(out.failed)} of {len(out.failed) + out.result.extra['files']} files failed",
              file=sys.stderr)
        return 1
    return code


def _relay(args: argparse.Namespace, opts: TransferOptions) -> int:
    from ...trees.job.cli import JobUsageError
    from .relay import notice, relay

    src, dst = args.paths
    if args.recursive or args.sync:
        raise JobUsageError("a tree between ftp:// and https:// is not supported: get -r it here, then put -r it")
    if args.push:
        raise JobUsageError("--push is for a copy between two https:// URLs")
    if args.tls_data != "private":
        raise JobUsageError("--tls-data is for copies between two ftp:// servers")
    if not args.quiet:
        print(f"drsftp: {notice(src, dst)}", file=sys.stderr)
    result = asyncio.run(relay(src, dest_url(src, dst), args.netrc, opts, args.parallel))
    return report(args, result, CANCELLED)
