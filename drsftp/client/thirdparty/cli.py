"""The command line of `drsftp copy SRC DST` (docs/THIRDPARTY.md, "Usage"):
two URLs make a third-party transfer, one file or (-r, --sync) a tree; a
local side makes it `get` or `put` (drsftp.cli runs those)."""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import posixpath
import sys
import urllib.parse

from ...ftp.url import FTPLocation
from ..session.control import FTPError, os_reason
from ..session.credentials import locate
from ..trees.job.cli import JobUsageError, check_json_path

log = logging.getLogger("drsftp.client")


def add_copy_opts(p: argparse.ArgumentParser) -> None:
    p.add_argument("--tls-data", choices=("private", "clear"), default="private",
                   help="with --tls between two servers: private (PROT P; the source must take SSCN, as the"
                        " data connection's TLS client) or clear (PROT C: only the control connections encrypted)")
    p.add_argument("--push", action="store_true",
                   help="between two https:// URLs: send the COPY to SRC with Destination (default: a pull, the"
                        " COPY sent to DST with Source)")


def _is_url(text: str) -> bool:
    return text.lower().startswith(("ftp://", "ftps://"))


def _is_http(text: str) -> bool:
    return text.lower().startswith(("https://", "http://"))


def one_local_side(args: argparse.Namespace) -> str | None:
    """"get" or "put" when one side is local (the same code path as those
    commands), None for two URLs; two local paths are a usage error."""
    src, dst = args.paths
    if (_is_url(src) and _is_url(dst)) or any(_is_http(p) for p in args.paths):
        return None  # (run_copy: https:// URLs go to client/http/tpc)
    if args.push:
        raise JobUsageError("--push is for a copy between two https:// URLs")
    if args.tls_data != "private":
        raise JobUsageError("--tls-data is for copies between two servers")
    if _is_url(src):
        return "get"
    if _is_url(dst):
        return "put"
    raise JobUsageError("copy needs an ftp:// or ftps:// URL on at least one side (two local paths: use cp)")


def dest_url(src: str, dst: str) -> str:
    """A DST ending in ``/`` names a directory: the file keeps its name there."""
    if not dst.endswith("/"):
        return dst
    name = posixpath.basename(urllib.parse.urlsplit(src).path.rstrip("/"))
    return dst + urllib.parse.quote(name)


def _options(args: argparse.Namespace):
    from ..transfer.options import TransferOptions

    progress = {"auto": None, "always": True, "never": False}[args.progress]
    return TransferOptions(
        tuning=args.tuning, force_buffers=args.force_buffers, resume=args.resume,
        progress=False if args.quiet else progress, use_drs_command=not args.no_drs_command,
        idle_timeout=args.timeout, max_time=args.max_time, verify=args.verify, tls=args.tls,
        ca_file=args.ca_file, insecure=args.insecure, clear_data=args.tls_data == "clear",
        pasv_address=args.pasv_address)


def run_copy(args: argparse.Namespace) -> int:
    """A third-party copy: one file, or a tree (-r, --sync)."""
    if any(_is_http(p) for p in args.paths):
        from ..http.tpc.command import run_http_copy

        return run_http_copy(args)
    if args.push:
        raise JobUsageError("--push is for a copy between two https:// URLs")
    if args.retries < 0:
        raise JobUsageError("--retries must be 0 or more")
    if args.checksum and not args.sync:
        raise JobUsageError("--checksum goes with --sync")
    if args.delete:
        raise JobUsageError("copy does not delete: --delete is for get -r and put -r")
    streams = args.parallel  # (-P parsed by argparse: None is auto)
    check_json_path(args.json)
    opts = _options(args)
    src_text, dst_text = args.paths
    if args.recursive or args.sync:
        return _run_tree(args, opts, streams)
    src = locate(src_text, args.netrc)
    dst = locate(dest_url(src_text, dst_text), args.netrc)
    _check_file_paths(src, dst)
    from ..transfer.attempts import with_retries
    from .single import copy

    def on_retry(attempt, delay, exc):
        print(f"drsftp: {exc}; retry {attempt}/{args.retries} in {delay:g} s", file=sys.stderr)

    result = asyncio.run(with_retries(lambda o: copy(src, dst, o, streams), opts, args.retries,
                                      on_retry=on_retry))
    _write_json(args.json, result.to_dict())
    if not args.quiet:
        print(result.summary_line(), file=sys.stderr)
    if not result.complete:
        print(f"drsftp: stopped after --max-time {args.max_time:g} s; --continue resumes", file=sys.stderr)
        return 28
    return 0


def _check_file_paths(src: FTPLocation, dst: FTPLocation) -> None:
    for loc, what in ((src, "SRC"), (dst, "DST")):
        name = posixpath.basename(loc.path)
        if name in ("", ".", ".."):
            raise JobUsageError(f"{what} {loc.path} names a directory, not a file: use -r for a tree")
    if (src.host, src.port, src.path) == (dst.host, dst.port, dst.path):
        raise JobUsageError("SRC and DST are the same file")


def _run_tree(args: argparse.Namespace, opts, streams: int | None) -> int:
    from ..trees.job.cli import DEFAULT_STREAMS, parse_src_url
    from .tree import run_copy_tree

    src, contents = parse_src_url(args.paths[0], args.netrc)
    dst, _ = parse_src_url(args.paths[1], args.netrc)
    result = asyncio.run(run_copy_tree(src, contents, dst, args.paths[1].endswith("/"), opts, args,
                                       DEFAULT_STREAMS if streams is None else streams))
    if args.json:
        try:
            result.write_json(args.json)
        except OSError as exc:
            raise FTPError(f"cannot write {args.json}: {os_reason(exc)}") from exc
    failed = result.count("failed")
    if not args.quiet:
        print(result.summary_line(), file=sys.stderr)
    if failed:
        print(f"drsftp: error: {failed} of {result.entries} entries failed", file=sys.stderr)
    if result.stopped:
        print(f"drsftp: stopped after --max-time {args.max_time:g} s; --continue resumes", file=sys.stderr)
        return 28
    return 1 if failed else 0


def _write_json(path: str | None, record: dict) -> None:
    if not path:
        return
    try:
        with open(path, "w") as f:
            json.dump(record, f, indent=1)
    except OSError as exc:
        raise FTPError(f"cannot write {path}: {os_reason(exc)}") from exc
