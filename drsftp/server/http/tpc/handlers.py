"""The two methods service.py hands here: COPY (copy.py, pull.py, push.py)
and POST with ``Content-Type: application/macaroon-request`` (tokens.py)."""

from __future__ import annotations

import os
import ssl
from dataclasses import dataclass, field

from aiohttp import web

from ....http import caveats
from ..auth import REALM, Login, check_perm
from ..drs import Exchange, Settings
from ..paths import Target
from ..problem import Problem
from ..uploads import Ledger
from . import copy
from .links import Links
from .tokens import Tokens, check_scope

MAX_POST = caveats.MAX_BODY


@dataclass
class TPC:
    """The copy's settings beside the front's (front.build)."""

    tokens: Tokens
    tls: ssl.SSLContext  # whom the server trusts as a COPY's remote
    max_streams: int
    timeout: float | None  # --data-timeout
    drs: Settings
    links: Links = field(default_factory=Links)  # kept-alive connections to remotes, across COPYs


def copy_method(request: web.BaseRequest) -> str:
    """The activity key of a COPY (http/caveats.py NEEDS): pull or push."""
    return "COPY-PUSH" if request.headers.get("Destination") and not request.headers.get("Source") else "COPY-PULL"


def check_copy_perm(who: Login, request: web.BaseRequest) -> None:
    """A pull stores (PUT's right), a push reads (GET's)."""
    check_perm(who, "GET" if copy_method(request) == "COPY-PUSH" else "PUT")


async def answer_copy(tpc: TPC, handler, request: web.BaseRequest, ex: Exchange, who: Login,
                      target: Target, max_body: int | None = None, ledger: Ledger | None = None) -> web.StreamResponse:
    """``max_body`` and ``ledger``: PUT's (service.py), which a pull stores under too."""
    from .pull import pull
    from .push import push

    push_, url = copy.plan(request, target, tpc.max_streams)
    cfg = copy.Settings4Copy(handler.third_party_peers, tpc.tls, tpc.max_streams, tpc.timeout, tpc.drs,
                              tpc.links, max_body, ledger)
    job = await copy.start(request, ex, target, cfg, push_, url, f"{who.user}@{request.remote or '?'}")
    ex.copy = job  # type: ignore[attr-defined]
    try:
        return await copy.run(request, ex, job, push if push_ else pull, cfg)
    finally:
        await copy.close(job)


async def answer_post(tpc: TPC, request: web.BaseRequest, ex: Exchange, who: Login, target: Target,
                      grant: caveats.Grant | None) -> web.Response:
    ctype = request.headers.get("Content-Type", "").split(";")[0].strip().lower()
    if ctype != caveats.CONTENT_TYPE:
        raise Problem(415, f"POST here asks for a macaroon: Content-Type {caveats.CONTENT_TYPE}.")
    if who.anonymous:
        raise Problem(401, "a macaroon is given to a logged-in user only.", {"WWW-Authenticate": REALM})
    length = request.content_length
    if length is not None and length > MAX_POST:
        raise Problem(413, f"a macaroon request holds {MAX_POST} bytes at most.")
    body = b""
    while data := await ex.read():
        body += data
        if len(body) > MAX_POST:
            raise Problem(413, f"a macaroon request holds {MAX_POST} bytes at most.", {"Connection": "close"})
    scheme = "https" if request.transport is not None and request.transport.get_extra_info("sslcontext") else "http"
    base = f"{scheme}://{request.host}"
    text = tpc.tokens.mint(who, target.href, body, base, grant)
    return web.Response(status=200, body=text, content_type="application/json")


def scope(grant: caveats.Grant | None, request: web.BaseRequest, target: Target,
          other: Target | None = None) -> None:
    """A bearer token's path and activity for this request (403 outside)."""
    if grant is None:
        return
    method = copy_method(request) if request.method == "COPY" else request.method
    check_scope(grant, method, target.href)
    if other is not None:
        check_scope(grant, method, other.href)
        if method == "MOVE" and os.path.lexists(other.fs):  # (a MOVE over it deletes it: RFC 4918 sec. 9.9.3)
            check_scope(grant, "DELETE", other.href)
