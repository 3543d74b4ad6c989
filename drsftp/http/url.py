"""HTTP URLs for drsftp's client, sans-IO: ``https://`` and ``http://``
(RFC 9110 sec. 4.2), user and password in the authority as the FTP URLs
take them (drsftp/ftp/url.py), for HTTP Basic (RFC 7617)."""

from __future__ import annotations

import urllib.parse
from dataclasses import dataclass

from ..ftp.url import Credentials, URLError, without_password

SCHEMES = {"https": 443, "http": 80}


@dataclass(frozen=True)
class HTTPLocation:
    scheme: str
    host: str
    port: int
    user: str | None  # None: no Authorization header (a server's --anonymous-read)
    password: str | None
    path: str  # percent-decoded, starts with /

    @property
    def origin(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.scheme}://{host}:{self.port}"

    def url(self, path: str | None = None) -> str:
        """The URL of ``path`` (default this location's) on the same server,
        percent-encoded, without credentials."""
        return self.origin + urllib.parse.quote(self.path if path is None else path, safe="/")

    @property
    def shown(self) -> str:
        """What an error names: the URL without its user part (a password
        is never echoed)."""
        return self.url()

    def at(self, path: str) -> HTTPLocation:
        """The same server and login, another path."""
        return HTTPLocation(self.scheme, self.host, self.port, self.user, self.password, path)


def is_http_url(text: str) -> bool:
    return text.lower().startswith(("https://", "http://"))


def parse_http_url(url: str, credentials: Credentials | None = None) -> HTTPLocation:
    """``https://[user[:pass]@]host[:port]/path``; a URL without a password
    asks ``credentials(host)`` for ``(login, account, password)`` (netrc's
    authenticators), as FTP URLs do.  The path may be ``/`` (a listing)."""
    shown = _without_userinfo(url)
    try:
        parts = urllib.parse.urlsplit(url)
        port = parts.port
    except ValueError as exc:  # "Invalid IPv6 URL", a port out of range
        raise URLError(f"bad URL {shown!r}: {exc}") from exc
    scheme = parts.scheme.lower()
    if scheme not in SCHEMES:
        raise URLError(f"not an https:// URL: {shown!r} (want https:// or http://)")
    if not parts.hostname:
        raise URLError(f"URL has no host: {shown!r}")
    if port == 0:
        raise URLError(f"bad port in {shown!r} (0 is no port)")
    if parts.query or parts.fragment:
        raise URLError(f"the URL {shown!r} has a query or fragment; drsftp names files by path alone")
    path = urllib.parse.unquote(parts.path) or "/"
    user = urllib.parse.unquote(parts.username) if parts.username else None
    password = urllib.parse.unquote(parts.password) if parts.password is not None else None
    for what, text in (("path", path), ("user", user), ("password", password)):
        # a request line or header cannot carry them (RFC 9110 sec. 5.5)
        if text is not None and any(c in text for c in "\r\n\0"):
            raise URLError(f"the URL's {what} holds a line break or NUL (%0d, %0a or %00), which HTTP cannot carry")
    if user is not None and ":" in user:
        raise URLError("the URL's user holds ':', which HTTP Basic cannot carry (RFC 7617 sec. 2)")
    if password is None and credentials is not None:
        entry = credentials(parts.hostname)
        if entry and (user is None or entry[0] in (None, "", user)):
            user = user or entry[0]
            password = entry[2]
    return HTTPLocation(scheme, parts.hostname, port or SCHEMES[scheme], user, password, path)


def _without_userinfo(url: str) -> str:
    scheme, sep, rest = url.partition("://")
    if not sep:  # (a scheme with one slash, "http:/user:pw@host": the password still hidden)
        return without_password(url)
    authority, slash, tail = rest.partition("/")
    return f"{scheme}://{authority.rpartition('@')[2]}{slash}{tail}"
