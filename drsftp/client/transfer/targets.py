"""Where a single file's `get` or `put` goes, from the paths on the command
line: a trailing slash names a directory, and the file keeps its own name
in it (as `curl -T FILE ftp://host/dir/` and `cp FILE dir/` do).  A tree
put or copied to a directory that does not exist makes it and its
missing parents, as `get -r` makes them locally (`mkdir -p`)."""

from __future__ import annotations

import os
import posixpath
import urllib.parse
from collections.abc import Awaitable, Callable

from ..session.control import ControlConnection, FTPError


def put_url(src: str, url: str) -> str:
    """``url`` ending in ``/`` names a directory on the server: the upload
    goes into it under the source file's name."""
    if not url.endswith("/"):
        return url
    return url + urllib.parse.quote(os.path.basename(os.path.normpath(src)))


def get_dest(dest: str | None, remote_path: str) -> str:
    """The local file a get writes: DEST, or the remote file's name in the
    directory DEST names (one that exists, or any DEST ending in ``/``,
    made by the get as `get -r` makes its destination)."""
    name = posixpath.basename(remote_path)
    if dest is None:
        return name
    if os.path.isdir(dest) or dest.endswith(os.sep):
        return os.path.join(dest, name)
    return dest


async def make_remote_dirs(path: str, stat: Callable[[str], Awaitable[object | None]], ctl: ControlConnection,
                           where: str = "") -> None:
    """``path`` and its missing parents made on a server, top down, one
    MKD a level (RFC 959 4.1.3: MKD makes one directory); ``stat(level)``
    is None where a level is missing.  The first level that cannot be made
    is an FTPError naming it (``where``: " on the destination ...")."""
    missing = []
    level = path.rstrip("/")
    while level not in ("", "/", ".") and await stat(level) is None:
        missing.append(level)
        level = posixpath.dirname(level)
    for level in reversed(missing):
        reply = await ctl.command(f"MKD {level}")
        if reply.code != 257:
            raise FTPError(f"cannot make the directory {level}{where}: {reply}", reply, transient=False)
