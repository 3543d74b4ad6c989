"""`drsftp ls https://.../dir/`: ``PROPFIND`` with ``Depth: 1`` (RFC 4918
sec. 9.1), its ``207`` read as it streams in and each entry printed as it
is parsed (drsftp/http/davlist.py), in the FTP ls's format."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator

from ...http.davlist import PROPFIND_BODY, Entry, ListingError, MultistatusParser
from ...http.url import HTTPLocation
from ...tuning import Role
from ..transfer.options import TransferOptions
from .errors import HTTPError
from .pool import Pool

READ_CHUNK = 1 << 16


async def entries(pool: Pool, path: str) -> AsyncIterator[Entry]:
    """The entries of the collection at ``path`` (not itself); a file's
    listing is the file."""
    headers = {"Depth": "1", "Content-Type": 'application/xml; charset="utf-8"'}
    parser, me = MultistatusParser(), path.rstrip("/") or "/"
    async with pool.request("PROPFIND", path, ok=(207,), headers=headers, body=lambda _: PROPFIND_BODY) as (resp, _):
        try:
            async for chunk in resp.content.iter_chunked(READ_CHUNK):
                for e in parser.feed(chunk):
                    if e.path != me or not e.is_dir:
                        yield e
            for e in parser.close():
                if e.path != me or not e.is_dir:
                    yield e
        except ListingError as exc:
            raise HTTPError(f"PROPFIND {pool.loc.url(path)}: {exc}", transient=False) from exc


def line(e: Entry, long: bool) -> str:
    name = e.name.encode("utf-8", "replace").decode("utf-8")
    if not long:
        return name + ("/" if e.is_dir else "")
    when = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(e.mtime)) if e.mtime is not None else "-"
    size = "-" if e.size is None or e.is_dir else str(e.size)
    return f"{'dir' if e.is_dir else 'file':5} {size:>12} {when} {name}"


async def run_ls(loc: HTTPLocation, opts: TransferOptions, long: bool) -> int:
    async with Pool(loc, opts, Role.RECEIVER) as pool:
        async for e in entries(pool, loc.path):
            print(line(e, long), flush=False)
    return 0
