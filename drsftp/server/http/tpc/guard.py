"""Where a COPY may go (docs/SECURITY.md, "Third-party copy"): the SSRF
guard.  A COPY makes this server open a connection its client chose, so
the remote host must be in ``--third-party-peers`` (the list FTP's
PORT/PASV peers come from, ftp/thirdparty.py; reloaded by SIGHUP):

- an IP literal is checked as it is, nothing resolved;
- a name is resolved once (getaddrinfo) and every address it gives must be
  listed; the connection then goes to those addresses only (the resolver
  below answers from what was checked, so a second lookup cannot swap in
  another address: DNS rebinding);
- each redirect's target is checked the same way before it is followed,
  at most MAX_HOPS of them;
- anything else is refused (403 before the copy starts, a failure marker
  after) with a sentence naming --third-party-peers, and one log line.
"""

from __future__ import annotations

import ipaddress
import logging
import socket
from dataclasses import dataclass, field
from urllib.parse import urljoin, urlsplit

from aiohttp.abc import AbstractResolver, ResolveResult

from ...peers import PeerList
from ..problem import Problem

log = logging.getLogger("drsftp.server")

MAX_HOPS = 3  # redirects a remote request follows at most
SCHEMES = {"https": 443, "http": 80}


class Refused(Problem):
    def __init__(self, sentence: str) -> None:
        super().__init__(403, sentence)


@dataclass(frozen=True)
class Remote:
    url: str
    scheme: str
    host: str  # as the URL names it (the TLS server name)
    port: int
    addresses: tuple[str, ...]

    @property
    def shown(self) -> str:
        """The URL without its query (where a token may ride)."""
        return self.url.split("?", 1)[0]


def normal(url: str) -> str:
    """davs:// and dav:// (gfal2's and davix's spellings) as https:// and http://."""
    scheme, sep, rest = url.strip().partition("://")
    return {"davs": "https", "dav": "http"}.get(scheme.lower(), scheme) + sep + rest


def split(url: str) -> tuple[str, str, int]:
    try:
        parts = urlsplit(url.strip())
        port = parts.port
    except ValueError:
        raise Problem(400, f"{url[:80]!r} is not a URL.") from None
    scheme = parts.scheme.lower()
    if scheme not in SCHEMES or not parts.hostname:
        raise Problem(400, f"{url[:80]!r} is not an https:// or http:// URL.")
    if parts.username is not None:
        raise Problem(400, "the remote URL holds credentials: pass them in TransferHeaderAuthorization.")
    return scheme, parts.hostname, port or SCHEMES[scheme]


@dataclass
class Guard:
    peers: PeerList
    who: str  # the client, for the log line
    checked: dict[str, tuple[str, ...]] = field(default_factory=dict)  # host -> its checked addresses

    async def check(self, url: str, what: str) -> Remote:
        """``url``'s remote, its addresses all in the peer list; Refused otherwise."""
        url = normal(url)
        scheme, host, port = split(url)
        try:
            addresses: tuple[str, ...] = (str(ipaddress.ip_address(host)),)
        except ValueError:
            addresses = await _resolve(host, port)
        outside = [a for a in addresses if a not in self.peers]
        if not addresses or outside:
            shown = host if not outside or outside == [host] else f"{host} ({outside[0]})"
            log.warning("http: refused a COPY's %s %s for %s: not in --third-party-peers", what,
                        url.split("?", 1)[0][:200], self.who)
            listed = "" if self.peers else " (the list is empty)"
            raise Refused(f"the {what} {shown} is not in --third-party-peers{listed}: this server copies only"
                          " to and from the hosts listed there.")
        self.checked[host.lower()] = addresses
        return Remote(url, scheme, host, port, addresses)

    async def hop(self, current: Remote, location: str, hops: int, what: str) -> Remote:
        if hops >= MAX_HOPS:
            raise Problem(502, f"the {what} redirected more than {MAX_HOPS} times.")
        target = urljoin(current.url, location)
        # the request's credentials (TransferHeaderAuthorization) ride only over TLS once they did (SECURITY.md)
        if current.scheme == "https" and urlsplit(target).scheme.lower() != "https":
            raise Problem(502, f"the {what} redirected from https to plain text: refused, it would carry the"
                               " request's credentials in clear.")
        return await self.check(target, f"{what}'s redirect")


async def _resolve(host: str, port: int) -> tuple[str, ...]:
    import asyncio

    try:
        infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except OSError as exc:
        raise Problem(400, f"the name {host} does not resolve: {exc.strerror or exc}.") from None
    out: list[str] = []
    for info in infos:
        addr = str(info[4][0])
        if addr not in out:
            out.append(addr)
    return tuple(out)


class PinnedResolver(AbstractResolver):
    """aiohttp's resolver for a COPY's connections: the addresses the guard
    checked, nothing looked up again."""

    def __init__(self, guard: Guard) -> None:
        self.guard = guard

    async def resolve(self, host: str, port: int = 0, family: int = socket.AF_INET) -> list[ResolveResult]:
        addresses = self.guard.checked.get(host.lower())
        if not addresses:
            raise OSError(f"{host} was not checked against --third-party-peers")
        return [ResolveResult(hostname=host, host=a, port=port,
                              family=socket.AF_INET6 if ":" in a else socket.AF_INET, proto=0,
                              flags=socket.AI_NUMERICHOST) for a in addresses]

    async def close(self) -> None:
        return None
