"""Where a single file's `get` or `put` goes, from the paths on the command
line: a trailing slash names a directory, and the file keeps its own name
in it (as `curl -T FILE ftp://host/dir/` and `cp FILE dir/` do)."""

from __future__ import annotations

import os
import posixpath
import urllib.parse


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
