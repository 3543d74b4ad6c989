"""What goes wrong over HTTP, as one sentence naming the URL (never its
password): the status a server answered (drsftp/http/statuses.py), or
what the connection did (refused, cut, timed out, TLS not trusted)."""

from __future__ import annotations

import ast
import asyncio
import contextlib
import re
import ssl
import urllib.parse

import aiohttp

from ...http.statuses import TRANSIENT, status_sentence
from ...http.url import HTTPLocation
from ..session.control import FTPError, os_reason
from ..session.tls import failure_sentence


class HTTPError(FTPError):
    """A failure of an HTTP transfer (an FTPError: the command line and
    --retries treat both alike); ``status``: the server's, if it answered."""

    def __init__(self, message: str, status: int | None = None, *, transient: bool | None = None) -> None:
        if transient is None:
            transient = status is None or status in TRANSIENT
        super().__init__(message, transient=transient)
        self.status = status


def status_error(loc: HTTPLocation, path: str, status: int, reason: str | None, method: str,
                 location: str | None = None) -> HTTPError:
    """``location``: the answer's Location header (a redirect names it)."""
    what = f"{method} {loc.url(path)}"
    if 300 <= status < 400:
        return redirect_error(what, loc.url(path), status, location)
    return HTTPError(f"{what}: {status_sentence(status, reason)}", status)


def redirect_error(what: str, url: str, status: int, location: str | None) -> HTTPError:
    """A 3xx, which drsftp does not follow (docs/HTTP.md): the URL its
    Location names (RFC 9110 sec. 10.2.2: relative to ``url``), shown
    without user or password, printable and cut short."""
    target = (location or "").strip()
    try:
        target = urllib.parse.urljoin(url, target) if target else ""
    except ValueError:  # ("Invalid IPv6 URL": shown as it came)
        pass
    scheme, sep, rest = target.partition("://")
    if sep:
        authority, slash, tail = rest.partition("/")
        target = f"{scheme}://{authority.rpartition('@')[2]}{slash}{tail}"
    target = "".join(c for c in target if c.isprintable())
    target = target if len(target) <= 200 else target[:200] + "..."
    if target and target.split("?", 1)[0] == url.rstrip("/") + "/" and not url.endswith("/"):
        # (a collection named without its slash: WebDAV servers answer so)
        return HTTPError(f"{url} is a directory: get it with -r ({target})", status, transient=False)
    where = f": {target}; give that URL" if target else ", naming no Location"
    return HTTPError(f"{what}: the server redirects elsewhere (HTTP {status}){where}", status, transient=False)


def connection_error(loc: HTTPLocation, exc: BaseException) -> HTTPError:
    """The sentence for an exception of aiohttp or the socket under it."""
    where = f"{loc.host}:{loc.port}"
    if isinstance(exc, aiohttp.ClientConnectorCertificateError):
        return HTTPError(failure_sentence(exc.certificate_error, loc.host), transient=False)
    if isinstance(exc, aiohttp.ClientConnectorSSLError):
        return HTTPError(failure_sentence(exc.os_error, loc.host, "http://"), transient=False)
    if isinstance(exc, aiohttp.ClientConnectorError):
        return HTTPError(f"cannot connect to {where}: {os_reason(exc.os_error)}")
    if isinstance(exc, aiohttp.ServerDisconnectedError | aiohttp.ClientPayloadError):
        return HTTPError(f"{loc.shown}: the server closed the connection mid-transfer (--continue resumes)")
    if isinstance(exc, aiohttp.ClientSSLError | ssl.SSLError):
        reason = getattr(exc, "reason", None) or exc
        hint = "; is it a plain-text port? use http://" if "WRONG_VERSION_NUMBER" in str(reason) else ""
        return HTTPError(f"TLS with {where} failed: {reason}{hint}")
    if isinstance(exc, asyncio.TimeoutError | aiohttp.ServerTimeoutError):
        return HTTPError(f"{loc.shown}: the server did not answer in time (--timeout)")
    if isinstance(exc, aiohttp.ClientResponseError):
        return HTTPError(not_http(loc, exc.message), transient=False)
    if isinstance(exc, OSError):
        return HTTPError(f"connection to {where} failed: {os_reason(exc)}")
    return HTTPError(f"{loc.shown}: {type(exc).__name__}: {exc}")


def not_http(loc: HTTPLocation, message: str) -> str:
    """aiohttp's message for an answer that is not HTTP quotes the bytes
    over many lines: one sentence with at most 40 of them, printable; an
    FTP server's greeting (RFC 959 sec. 4.2: three digits) says ftp://."""
    lines = message.strip().splitlines()
    what = "".join(c for c in (lines[0] if lines else "")[:80] if c.isprintable()).rstrip(": ")
    raw = b""
    if m := re.search(r"b(['\"])(?:(?!\1)[^\\]|\\.)*\1", message):  # (the bytes, as Python's repr)
        with contextlib.suppress(ValueError, SyntaxError):
            raw = ast.literal_eval(m.group(0))
    said = "".join(chr(b) for b in raw[:200] if 32 <= b < 127)[:40]
    if re.match(rb"[1-5]\d\d[ -]", raw):
        return f"{loc.shown}: the server answered like an FTP server ({said!r}): use ftp://"
    began = f", beginning {said!r}" if said else ""
    return f"{loc.shown}: the server's answer is not valid HTTP ({what or 'unreadable'}{began})"
