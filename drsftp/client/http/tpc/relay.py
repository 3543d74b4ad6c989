"""`drsftp copy` between an ftp:// and an https:// URL: no server speaks
the other's third-party protocol, so the file goes through this host
(docs/HTTP.md, "drsftp copy over HTTPS"): a get into a private temporary
directory, then a put from it, each leg the command of its protocol
(with its -P, --verify and DRS), the directory removed at the end."""

from __future__ import annotations

import os
import posixpath
import shutil
import tempfile
import time
import urllib.parse
from dataclasses import replace

from ....http.url import is_http_url
from ...result import TransferResult
from ...transfer.options import TransferOptions


def notice(src: str, dst: str) -> str:
    """The one line said on stderr: which way, and that it is not third-party."""
    def scheme(url: str) -> str:
        return url.split("://", 1)[0].lower()
    return f"{scheme(src)}:// to {scheme(dst)}://: the data goes through this host"


async def relay(src: str, dst: str, netrc: str | None, opts: TransferOptions, streams: int | None) -> TransferResult:
    """Copy the file of URL ``src`` to URL ``dst`` (one ftp://, one https://)."""
    tmp = tempfile.mkdtemp(prefix="drsftp-relay-")
    try:
        began = time.monotonic()
        name = posixpath.basename(urllib.parse.unquote(urllib.parse.urlsplit(src).path))
        name = "file" if name in ("", ".", "..") else name
        local = os.path.join(tmp, name)
        leg = replace(opts, resume=False)
        got = await _get(src, local, netrc, leg, streams)
        put = await _put(local, dst, netrc, leg, streams)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    r = TransferResult(direction="copy", path=got.path, bytes=put.bytes, seconds=time.monotonic() - began,
                       total_size=got.total_size, complete=got.complete and put.complete,
                       sha256=put.sha256 or got.sha256)
    r.update(via="this host", source=src_shown(src), destination=src_shown(dst), legs={
        "get": {k: v for k, v in got.to_dict().items() if k != "timeline"},
        "put": {k: v for k, v in put.to_dict().items() if k != "timeline"}},
        note=f"through this host ({got.mbps:.0f} Mbit/s in, {put.mbps:.0f} Mbit/s out)")
    return r


def src_shown(url: str) -> str:
    """A URL as a record shows it: without its user part."""
    scheme, _, rest = url.partition("://")
    authority, slash, tail = rest.partition("/")
    return f"{scheme}://{authority.rpartition('@')[2]}{slash}{tail}"


async def _get(url: str, dest: str, netrc: str | None, opts: TransferOptions, streams: int | None) -> TransferResult:
    if is_http_url(url):
        from ..cli import locate as http_locate
        from ..get import get

        return await get(http_locate(url, netrc), dest, opts, streams)
    from ...session.credentials import locate
    from ...streams import parallel
    from ...transfer.getput import get as ftp_get

    loc = locate(url, netrc)
    return await (ftp_get(loc, dest, opts) if streams == 1 else parallel.get(loc, dest, opts, streams))


async def _put(src: str, url: str, netrc: str | None, opts: TransferOptions, streams: int | None) -> TransferResult:
    if is_http_url(url):
        from ..cli import locate as http_locate
        from ..put import put

        return await put(src, http_locate(url, netrc), opts, streams)
    from ...session.credentials import locate
    from ...streams import parallel
    from ...transfer.getput import put as ftp_put

    loc = locate(url, netrc)
    return await (ftp_put(src, loc, opts) if streams == 1 else parallel.put(src, loc, opts, streams))
