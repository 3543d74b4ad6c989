"""The remote side's credentials of an HTTP third-party copy: a macaroon
the client asks that endpoint for (docs/HTTP.md, "Macaroons"; the request
gfal2 and FTS3 send), passed in ``TransferHeaderAuthorization: Bearer``
so the server doing the copy never holds the remote's password.

The token is asked for with the remote's own Basic login (a ``POST`` with
``Content-Type: application/macaroon-request``), scoped to the path (the
file, or a tree's top: ``path:`` holds for everything below) and to the
activities the copy needs there: DOWNLOAD,LIST to read a pull's source,
UPLOAD,MANAGE,READ_METADATA,LIST to write a push's destination (and
answer its HEADs; XRootD checks a PUT against MANAGE).  A remote that serves no macaroons (404, 405, 415, 501: a plain
WebDAV server) gets its Basic credentials forwarded instead, said once in
the log; a remote URL without a user is read anonymously (no header)."""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import time

from ....http import caveats
from ..errors import HTTPError
from ..pool import Pool

log = logging.getLogger("drsftp.client")

READ = "DOWNLOAD,LIST"  # a pull's source
WRITE = "UPLOAD,MANAGE,READ_METADATA,LIST"  # a push's destination (XRootD wants MANAGE for a PUT)
VALIDITY = 3600  # s a token is asked for (longer with --max-time)
RENEW_BEFORE = 600  # s before its end a tree asks for a new one
NO_MACAROONS = (400, 404, 405, 415, 501)  # the endpoint mints none: Basic goes instead
MAX_ANSWER = 64 * 1024  # bytes of the token's answer read at most


def validity(max_time: float | None) -> int:
    """Seconds the token lives: an hour, or --max-time and ten minutes
    (the copy reads the remote until it ends; docs/HTTP.md says a token
    that expires meanwhile does not stop a drsftp server, others may)."""
    wanted = VALIDITY if max_time is None else max(VALIDITY, int(max_time) + RENEW_BEFORE)
    return min(wanted, caveats.MAX_VALIDITY)


def request_body(activities: str, seconds: int) -> bytes:
    return json.dumps({"caveats": [f"activity:{activities}"], "validity": f"PT{seconds}S"}).encode()


def basic(user: str, password: str | None) -> str:
    """HTTP Basic (RFC 7617 sec. 2): user-id ":" password, UTF-8, base64."""
    return "Basic " + base64.b64encode(f"{user}:{password or ''}".encode()).decode("ascii")


class RemoteAuth:
    """``await header()``: the ``TransferHeaderAuthorization`` value for
    the remote (None: none), a fresh token once the last nears its end."""

    def __init__(self, pool: Pool, path: str, activities: str, seconds: int) -> None:
        self.pool, self.path, self.activities, self.seconds = pool, path, activities, seconds
        self.kind = "none" if not pool.loc.user else "macaroon"  # then "basic" if none is minted
        self._value: str | None = None
        self._until = 0.0
        self._minting = asyncio.Lock()  # (a tree's COPYs start together: one POST for all of them)

    async def header(self) -> str | None:
        loc = self.pool.loc
        if not loc.user:
            return None
        if self.kind == "basic":
            return basic(loc.user, loc.password)
        async with self._minting:
            if self.kind == "basic":  # (found out by the POST another COPY waited for)
                return basic(loc.user, loc.password)
            if self._value is None or time.monotonic() >= self._until:
                self._value = await self._mint()
            return self._value

    async def _mint(self) -> str:
        loc = self.pool.loc
        path = self.path
        headers = {"Content-Type": caveats.CONTENT_TYPE, "Accept": "application/json"}
        body = request_body(self.activities, self.seconds)
        began = time.monotonic()
        try:
            async with self.pool.request("POST", path, ok=(200, 201), headers=headers, body=lambda _: body) as (r, _):
                text = await r.content.read(MAX_ANSWER)
        except HTTPError as exc:
            if exc.status not in NO_MACAROONS:
                raise
            log.info("%s gives no macaroon (HTTP %s): its Basic login goes in TransferHeaderAuthorization",
                     loc.origin, exc.status)
            self.kind = "basic"
            return basic(loc.user or "", loc.password)
        try:
            token = json.loads(text.decode("utf-8"))["macaroon"]
        except (UnicodeDecodeError, ValueError, KeyError, TypeError):
            raise HTTPError(f"POST {loc.url(path)}: the macaroon answer holds no \"macaroon\" field",
                            transient=False) from None
        if not isinstance(token, str) or not token or any(c in token for c in "\r\n"):
            raise HTTPError(f"POST {loc.url(path)}: the macaroon answer's token is not one line", transient=False)
        self._until = began + max(self.seconds - RENEW_BEFORE, self.seconds / 2)
        return f"Bearer {token}"
