"""URL paths to files inside a user's home (docs/HTTP.md, "Serving").

The request target's path is percent-decoded once (RFC 3986 sec. 2.1), as
UTF-8, and split at ``/``; every segment must pass the FTP side's rule for
one name (ftp/safepath.py: no ``.`` or ``..``, NUL, CR, LF), and no
backslash may appear (a Windows client's separator).  A ``%2F`` becomes a
separator like any ``/``, and ``%252e`` a literal ``%2e``: decoding once
leaves nothing to climb with.  The joined path must also resolve (symlinks
followed) at or below the home's real path, else 403.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from urllib.parse import quote, unquote, urlsplit

from ...ftp.safepath import UnsafePath, check_name
from .problem import Problem

MAX_TARGET = 8190  # the request line's limit (aiohttp's max_line_size)


@dataclass(frozen=True)
class Target:
    home: str  # the user's home, real path
    parts: tuple[str, ...]  # the URL path's segments

    @property
    def fs(self) -> str:
        return os.path.join(self.home, *self.parts) if self.parts else self.home

    @property
    def href(self) -> str:
        """The client's path, ``/a/b`` (``/``: the home)."""
        return "/" + "/".join(self.parts)

    def quoted(self, collection: bool = False) -> str:
        """The path percent-encoded for a response (a collection's ends in ``/``)."""
        href = quote(self.href, safe="/")
        return href.rstrip("/") + "/" if collection else href

    @property
    def parent(self) -> Target:
        return Target(self.home, self.parts[:-1])


def url_parts(target: str) -> tuple[str, ...]:
    """The segments of a request target's path (origin or absolute form)."""
    if len(target) > MAX_TARGET:
        raise Problem(414, "the request target is too long.")
    if not target.startswith("/"):
        target = urlsplit(target).path if "://" in target else ""
        if not target.startswith("/"):
            raise Problem(400, "the request target is not a path.")
    path = target.split("?", 1)[0].split("#", 1)[0]
    try:
        text = unquote(path, errors="strict")
    except UnicodeDecodeError:
        raise Problem(400, "the path is not UTF-8 once percent-decoded.") from None
    if "\\" in text:
        raise Problem(400, "the path holds a backslash; separate its names with /.")
    parts = tuple(p for p in text.split("/") if p)
    try:
        for p in parts:
            check_name(p)
    except UnsafePath:
        raise Problem(400, "the path holds a name that is not allowed (., .., NUL, CR or LF).") from None
    return parts


def resolve(home: str, parts: tuple[str, ...]) -> Target:
    """``parts`` under ``home``; 403 if it leads out (through a symlink)."""
    real_home = os.path.realpath(home)
    target = Target(real_home, parts)
    if not inside(real_home, target.fs):
        raise Problem(403, "the path leads out of your home.")
    return target


def inside(real_home: str, path: str) -> bool:
    real = os.path.realpath(path)
    return real == real_home or real.startswith(real_home.rstrip("/") + "/")


def destination(header: str | None, home: str, host: str | None, scheme: str) -> Target:
    """MOVE's ``Destination`` (RFC 4918 sec. 10.3): an absolute URL or a
    path, resolved as a request path is.  A URL naming another server
    (scheme, host or port other than the request's ``Host``) is 502
    (sec. 9.9.4): a MOVE never leaves this one."""
    if not header:
        raise Problem(400, "MOVE needs a Destination header.")
    value = header.strip()
    if "://" in value and not value.startswith("/"):
        if not host:
            raise Problem(400, "a Destination URL needs the request's Host to compare it with.")
        if _authority(value, "") != _authority(f"{scheme}://{host}", scheme):
            raise Problem(502, "the Destination names another server: a MOVE stays on this one.")
    return resolve(home, url_parts(value))


def _authority(url: str, scheme: str) -> tuple[str, str, int | None]:
    """(scheme, host, port) of ``url``, the scheme's default port filled in."""
    try:
        split = urlsplit(url[:MAX_TARGET])
        port = split.port
    except ValueError:
        raise Problem(400, "the Destination is not a URL.") from None
    s = split.scheme.lower() or scheme
    return s, (split.hostname or "").lower(), port or {"http": 80, "https": 443}.get(s)
