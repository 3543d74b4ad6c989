"""FTP URLs, sans I/O: ``ftp://`` and ``ftps://`` (RFC 1738 sec. 3.2)."""

from __future__ import annotations

import re
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass

# host -> (login, account, password) or None, as netrc.authenticators answers
Credentials = Callable[[str], "tuple[str, str | None, str | None] | None"]


class URLError(ValueError):
    pass


@dataclass(frozen=True)
class FTPLocation:
    host: str
    port: int
    user: str
    password: str
    path: str
    implicit_tls: bool = False  # ftps://: TLS from the first byte (implicit FTPS)


def parse_url(url: str, credentials: Credentials | None = None) -> FTPLocation:
    """``ftp://[user[:pass]@]host[:port]/path``; a URL without a password
    asks ``credentials(host)`` for ``(login, account, password)`` (netrc's
    authenticators: drsftp.client.session.credentials reads the file); a missing
    user means anonymous.  ``ftps://`` is implicit FTPS, port 990 unless
    given."""
    shown = without_password(url)  # (errors echo the URL, never its password)
    try:
        parts = urllib.parse.urlsplit(url)
    except ValueError as exc:  # "Invalid IPv6 URL"
        raise URLError(f"bad URL {shown!r}: {exc}") from exc
    if parts.scheme not in ("ftp", "ftps"):
        raise URLError(f"not an ftp:// URL: {shown!r} (want ftp:// or ftps://)")
    if not parts.hostname:
        raise URLError(f"URL has no host: {shown!r}")
    try:
        port = parts.port
    except ValueError as exc:
        raise URLError(f"bad port in {shown!r}") from exc
    if port == 0:
        raise URLError(f"bad port in {shown!r} (0 is no port)")
    if parts.query or parts.fragment or url.endswith(("?", "#")):
        # RFC 1738 sec. 3.2 gives FTP URLs no query: '?' and '#' in a name are written %3F and %23
        raise URLError(f"the URL {shown!r} has a query or fragment; write ? as %3F and # as %23")
    port = port or (990 if parts.scheme == "ftps" else 21)
    path = urllib.parse.unquote(parts.path)
    if not path or path == "/":
        raise URLError(f"URL names no file: {shown!r}")
    user = urllib.parse.unquote(parts.username) if parts.username else None
    password = urllib.parse.unquote(parts.password) if parts.password is not None else None
    for what, text in (("path", path), ("user", user), ("password", password)):
        # a CR or LF would end the command it goes in (RFC 959 sec. 4.1.3)
        # and send the rest to the server as a command of its own
        if text is not None and any(c in text for c in "\r\n\0"):
            raise URLError(f"the URL's {what} holds a line break or NUL (%0d, %0a or %00), which FTP cannot carry")
    if password is None:
        entry = credentials(parts.hostname) if credentials is not None else None
        if entry and (user is None or entry[0] in (None, "", user)):
            user = user or entry[0]
            password = entry[2]
    if user is None:
        user, password = "anonymous", password or "drsftp@"
    return FTPLocation(parts.hostname, port, user, password or "", path, implicit_tls=parts.scheme == "ftps")


def without_password(url: str) -> str:
    """``url`` with the password of its user part as ``***``, also after a
    scheme mistyped with one slash or none (``ftp:/user:pw@host``)."""
    # (to the last @: a password may hold / or @)
    return re.sub(r"^([A-Za-z][A-Za-z0-9+.-]*:/{0,3}[^:@/]*:).*@", r"\1***@", url)
