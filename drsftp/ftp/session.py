"""Client session state, sans-IO: which reply answers which command, and URLs.

RFC 959 replies come in command order, but a transfer command has two
(1yz, then the final reply), and DRS may be sent while the transfer runs.
Its reply can then arrive before the transfer's final reply, so routing by
order alone would hand the 226 to DRS.  Replies to DRS carry the word DRS
first (docs/PROTOCOL.md), so they are routed by that mark instead.
"""

from __future__ import annotations

import netrc
import os
import re
import urllib.parse
from collections import deque
from dataclasses import dataclass
from typing import Any

from .replies import Reply


class ReplyRouter:
    """Pair replies with the commands waiting for them."""

    def __init__(self) -> None:
        self._pending: deque[tuple[str, Any]] = deque()  # (verb, token)

    def sent(self, verb: str, token: Any) -> None:
        self._pending.append((verb.upper(), token))

    @property
    def pending(self) -> int:
        return len(self._pending)

    def route(self, reply: Reply) -> tuple[Any, bool] | None:
        """Returns (token, final) for the command this reply answers, or
        None for an unsolicited reply (e.g. 421 before shutdown)."""
        if reply.first.startswith("DRS"):
            for i, (verb, token) in enumerate(self._pending):
                if verb == "DRS":
                    del self._pending[i]
                    return token, True
        for i, (verb, token) in enumerate(self._pending):
            if verb == "DRS":
                continue  # never hand a non-DRS reply to DRS
            if reply.preliminary:
                return token, False
            del self._pending[i]
            return token, True
        # A stock server answering DRS without the mark (500 not understood)
        if self._pending and self._pending[0][0] == "DRS":
            return self._pending.popleft()[1], True
        return None

    def fail_all(self) -> list[Any]:
        tokens = [t for _, t in self._pending]
        self._pending.clear()
        return tokens


def partial_name(path: str) -> str:
    """Where a drsftp server keeps an upload until it is complete:
    ``dir/.NAME.part`` beside ``dir/NAME`` (same directory: the final
    rename is atomic)."""
    head, sep, tail = path.rpartition("/")
    return f"{head}{sep}.{tail}.part"


def final_name(path: str) -> str:
    """The name :func:`partial_name` stands for (``path`` if it is none)."""
    head, sep, tail = path.rpartition("/")
    if tail.startswith(".") and tail.endswith(".part") and len(tail) > len("..part"):
        return f"{head}{sep}{tail[1:-len('.part')]}"
    return path


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


def parse_url(url: str, netrc_file: str | None = None) -> FTPLocation:
    """``ftp://[user[:pass]@]host[:port]/path``; the password may come from
    ~/.netrc (or ``netrc_file``); a missing user means anonymous.
    ``ftps://`` is implicit FTPS, port 990 unless given."""
    if netrc_file and not os.path.exists(netrc_file):  # (a typo must not log in as anonymous)
        raise URLError(f"cannot read --netrc {netrc_file}: no such file")
    shown = _without_password(url)  # (errors echo the URL, never its password)
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
        entry = _netrc_lookup(parts.hostname, netrc_file)
        if entry and (user is None or entry[0] in (None, "", user)):
            user = user or entry[0]
            password = entry[2]
    if user is None:
        user, password = "anonymous", password or "drsftp@"
    return FTPLocation(parts.hostname, port, user, password or "", path, implicit_tls=parts.scheme == "ftps")


def _without_password(url: str) -> str:
    """``url`` with the password of its user part as ``***``."""
    return re.sub(r"^([^:/]+://[^:@/]*:).*@", r"\1***@", url)  # (to the last @: a password may hold / or @)


def _netrc_lookup(host: str, netrc_file: str | None) -> tuple[str, str | None, str | None] | None:
    path = netrc_file or os.path.join(os.path.expanduser("~"), ".netrc")
    if not os.path.exists(path):
        return None
    try:
        return netrc.netrc(path).authenticators(host)
    except (netrc.NetrcParseError, OSError) as exc:
        why = exc.strerror.lower() if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise URLError(f"cannot read {path}: {why}") from exc
