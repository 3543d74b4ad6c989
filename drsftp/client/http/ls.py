"""`drsftp ls https://.../dir/`: ``PROPFIND`` with ``Depth: 1`` (RFC 4918
sec. 9.1), its ``207`` read as it streams in and each entry printed as it
is parsed (drsftp/http/davlist.py), in the FTP ls's format."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator

import aiohttp

from ...http.davlist import PROPFIND_BODY, Entry, ListingError, MultistatusParser
from ...http.url import HTTPLocation
from ...tuning import Role
from ..transfer.options import TransferOptions
from .errors import HTTPError, status_error
from .pool import Pool

READ_CHUNK = 1 << 16
REFUSALS = tuple(s for s in range(400, 600) if s != 401)  # read for the server's sentence (401: the login's)
SENTENCE = 400  # bytes of a refusal's body read


async def entries(pool: Pool, path: str, itself: bool = False) -> AsyncIterator[Entry]:
    """The entries of the collection at ``path`` (with ``itself`` its own
    entry too, wherever the server puts it); a file's listing is the file.
    A refusal (a listing too long for the server: 507 or 403) is an
    HTTPError with the server's own sentence."""
    headers = {"Depth": "1", "Content-Type": 'application/xml; charset="utf-8"'}
    parser, me = MultistatusParser(), path.rstrip("/") or "/"
    async with pool.request("PROPFIND", path, ok=(207, *REFUSALS), headers=headers,
                            body=lambda _: PROPFIND_BODY) as (resp, _):
        if resp.status != 207:
            raise await _refusal(pool, path, resp)
        try:
            async for chunk in resp.content.iter_chunked(READ_CHUNK):
                for e in parser.feed(chunk):
                    if itself or e.path != me or not e.is_dir:
                        yield e
            for e in parser.close():
                if itself or e.path != me or not e.is_dir:
                    yield e
        except ListingError as exc:
            raise HTTPError(f"PROPFIND {pool.loc.url(path)}: {exc}", transient=False) from exc


async def _refusal(pool: Pool, path: str, resp: aiohttp.ClientResponse) -> HTTPError:
    """The status's sentence and the first line of the server's body (drsftp
    serve says why there: docs/HTTP.md), printable and cut short."""
    err = status_error(pool.loc, path, resp.status, resp.reason, "PROPFIND", resp.headers.get("Location"))
    try:
        body = await resp.content.read(SENTENCE)
    except (aiohttp.ClientError, OSError):
        body = b""
    said = "".join(c for c in body.decode("utf-8", "replace").strip().split("\n")[0] if c.isprintable())
    if not said or resp.headers.get("Content-Type", "text/plain").split(";")[0].strip() != "text/plain":
        return err
    return HTTPError(f"{err}; the server says: {said[:SENTENCE // 2]}", resp.status, transient=err.transient)


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
