"""One HTTP request, from its credentials to its status (docs/HTTP.md).

Each request is authenticated (auth.py) against the FTP handler's
authorizer as it is now (a SIGHUP's reload applies), its path resolved in
the user's home (paths.py), its permission checked, and it is handed to
files, uploads or dav.  A refusal is its status with one sentence as the
body.  A GET with a body and every PUT is one line of the transfer log,
shaped as the FTP side's (ops/translog.py), and feeds the metrics.
"""

from __future__ import annotations

import asyncio
import logging
import os
import re
import stat
import time
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from ...http import drsheader
from ...tuning import Role
from ..ftp.partfile import part_path
from ..ops import translog
from . import auth, dav, files, uploads
from .drs import Connection, Exchange
from .paths import Target, destination, resolve, url_parts
from .problem import Problem
from .tpc import handlers

log = logging.getLogger("drsftp.server")

METHODS = frozenset({"GET", "HEAD", "PUT", "DELETE", "MKCOL", "MOVE", "PROPFIND", "OPTIONS", "COPY", "POST"})
CONDITIONAL = frozenset({"GET", "HEAD", "PUT", "DELETE", "MOVE"})  # If-Match, If-None-Match evaluated
ETAGS = re.compile(r'(W/)?("[^"]*")')


@dataclass
class Service:
    handler: Any  # the FTP handler class: its authorizer (reloaded in place) and metrics
    tls: bool
    max_body: int | None = None  # bytes of a PUT at most (None: the disk's room)
    data_timeout: float | None = None  # seconds a body may make no progress
    conns: dict[Any, Connection] = field(default_factory=dict)  # by protocol (front.py)
    running: int = 0  # requests being answered
    digests: files.DigestCache = field(default_factory=files.DigestCache)
    ledger: uploads.Ledger = field(default_factory=uploads.Ledger)
    tpc: Any = None  # tpc.handlers.TPC: COPY and macaroons (None: not served)

    async def __call__(self, request: web.BaseRequest) -> web.StreamResponse:
        self.running += 1
        began, wall = time.monotonic(), time.time()
        conn = self.conns.get(request.protocol)
        ex = Exchange(request, conn, self.data_timeout)
        if conn is not None:
            conn.busy += 1
        try:
            return await self._answer(request, ex)
        except Problem as p:
            return self._refusal(request, ex, p)
        except OSError as exc:
            if not isinstance(exc, ConnectionError) and not ex.sent:  # the disk's error, a status can say it
                log.warning("http: %s %s: %s", request.method, ex.href or "?", exc)
                return self._refusal(request, ex, Problem(500, f"the server could not do it: {exc.strerror or exc}.",
                                                          {"Connection": "close"}))
            # mid-body: the connection cannot carry a status any more
            log.info("http: %s %s from %s cut short: %s", request.method, ex.href or "?", request.remote, exc)
            if request.transport is not None:
                request.transport.close()
            resp = web.Response(status=400)  # (aiohttp's write of it meets the closed connection quietly)
            resp.force_close()
            return resp
        except ValueError:  # a fault of ours: one sentence (and the log), not aiohttp's page
            log.warning("http: %s %r failed", request.method, request.raw_path, exc_info=True)
            if ex.sent:
                raise
            return self._refusal(request, ex, Problem(500, "the server failed to answer this request.",
                                                      {"Connection": "close"}))
        finally:
            self.running -= 1
            if conn is not None:
                conn.request_ended()
            if ex.who is not None and ex.href is not None:
                self._log(request, ex, ex.who, ex.href, began, wall)

    async def _answer(self, request: web.BaseRequest, ex: Exchange) -> web.StreamResponse:
        method = request.method
        if method not in METHODS:
            raise Problem(405, f"{method} is not served here.", {"Allow": dav.ALLOW})
        if method in ("COPY", "POST") and self.tpc is None:
            raise Problem(405, f"{method} is not served here.", {"Allow": dav.ALLOW})
        parts = url_parts(request.raw_path)
        who, grant = await self._login(request)
        if method == "COPY":
            handlers.check_copy_perm(who, request)
        elif method != "POST":
            auth.check_perm(who, method)
        target = resolve(who.home, parts)
        if grant is not None:
            other = self._destination(request, who) if method == "MOVE" else None
            handlers.scope(grant, request, target, other)
        headers = ex.headers = self._drs(request, ex)
        if method == "COPY":
            ex.who, ex.href = who, target.href
            return await handlers.answer_copy(self.tpc, self.handler, request, ex, who, target, self.max_body,
                                              self.ledger)
        if method == "POST":
            return await handlers.answer_post(self.tpc, request, ex, who, target, grant)
        if method in CONDITIONAL:
            unchanged = preconditions(request, target)
            if unchanged is not None:
                return web.Response(status=304, headers={**headers, "ETag": unchanged})
        if method in ("GET", "PUT"):
            ex.who, ex.href = who, target.href  # a transfer: its log line
        if method in ("GET", "HEAD"):
            if method == "HEAD" and request.headers.get(drsheader.PART_QUERY, "").strip().lower() == "ranges":
                headers[drsheader.PART_RANGES] = drsheader.format_ranges(self.ledger.held(part_path(target.fs)))
            return await files.get(ex, target, self.digests, headers)
        if method == "PUT":
            resp = await uploads.put(ex, target, self.ledger, self.max_body, headers)
            self._drs_after(ex, resp)
            return resp
        if method == "OPTIONS":
            resp = dav.options()
        elif method == "DELETE":
            resp = dav.delete(target)
        elif method == "MKCOL":
            resp = dav.mkcol(request, target)
        elif method == "MOVE":
            resp = dav.move(request, target, self._destination(request, who), who.may("d"))
        else:
            body = await _small_body(ex)
            resp = await asyncio.get_running_loop().run_in_executor(None, dav.propfind, request, target, body)
        resp.headers.update(headers)
        return resp

    def _destination(self, request: web.BaseRequest, who: auth.Login) -> Target:
        return destination(request.headers.get("Destination"), who.home, request.headers.get("Host"), request.scheme)

    async def _login(self, request: web.BaseRequest) -> tuple[auth.Login, Any]:
        """The request's user, by a bearer macaroon (with its grant) or by
        Basic; a request carrying both (gfal2 adds a configured Basic header
        to its token) is taken by its token, the narrower of the two."""
        bearer = _bearer(request) if self.tpc is not None else None
        if bearer is not None:
            grant = self.tpc.tokens.verify(bearer)
            return self.tpc.tokens.login(self.handler.authorizer, grant), grant
        try:
            return await auth.login(self.handler.authorizer, request.method,
                                    request.headers.get("Authorization")), None
        except auth.Refused as refused:
            self._observe(translog.login_record(time.time(), request.remote or "?", refused.user, False, self.tls))
            raise

    def _drs(self, request: web.BaseRequest, ex: Exchange) -> dict[str, str]:
        """A DRS request header's pairs to the tuner of the direction the
        request's body travels; the response's DRS header (docs/HTTP.md, "DRS")."""
        try:
            pairs = drsheader.parse_report(request.headers.get(drsheader.HEADER))
        except drsheader.DRSArgumentError as exc:
            raise Problem(400, f"the DRS header is malformed: {exc}") from None
        if pairs is None:
            return {}
        ex.drs_peer = True
        # a tuner starts with a file's body (GET, PUT); a request without one
        # reports the connection's tuner if it has one (docs/HTTP.md, "DRS")
        create = request.method in ("GET", "PUT")
        tuner = ex.conn.tuner(_role(request), create) if ex.conn is not None else None
        if tuner is None:
            return {drsheader.HEADER: ""}
        if pairs:
            tuner.on_peer_pairs(pairs)
        return {drsheader.HEADER: drsheader.report_value(tuner.report())}

    def _drs_after(self, ex: Exchange, resp: web.StreamResponse) -> None:
        """A PUT's report: its receiver's, once the body arrived."""
        tuner = ex.conn.tuner(Role.RECEIVER) if ex.drs_peer and ex.conn is not None else None
        if tuner is not None:
            resp.headers[drsheader.HEADER] = drsheader.report_value(tuner.report())

    def _refusal(self, request: web.BaseRequest, ex: Exchange, p: Problem) -> web.Response:
        resp = web.Response(status=p.status, text=p.sentence[:1].upper() + p.sentence[1:] + "\n",
                            headers=p.headers)
        for key, value in ex.headers.items():  # the DRS report, DRS-Part-Ranges: on refusals too
            resp.headers.setdefault(key, value)
        if p.headers.get("Connection", "").lower() == "close":
            resp.force_close()
        if ex.drs_peer and request.method == "PUT":
            self._drs_after(ex, resp)
        return resp

    def _log(self, request: web.BaseRequest, ex: Exchange, who: auth.Login, href: str, began: float,
             wall: float) -> None:
        job = getattr(ex, "copy", None)
        if job is not None and ex.began:
            remote = job.stripes[0].remote if job.stripes and job.stripes[0].remote else None
            rec = translog.transfer_record(wall, request.remote or "?", who.user, "get" if job.push else "put", href,
                                           job.moved, time.monotonic() - began, job.streams, job.drs_peer,
                                           ex.complete, self.tls, remote[0] if remote else job.remote.host)
            rec["remote"] = job.remote.shown  # (the copy's other end; the log line names it)
            self._observe(rec)
            return
        if request.method == "PUT" and ex.began:
            direction, nbytes, complete = "put", ex.received, ex.complete
        elif request.method == "GET" and ex.sent:
            direction, nbytes, complete = "get", ex.sent, ex.complete
        else:
            return
        rec = translog.transfer_record(wall, request.remote or "?", who.user, direction, href, nbytes,
                                       time.monotonic() - began, 1, ex.drs_peer, complete, self.tls)
        self._observe(rec)

    def _observe(self, rec: dict) -> None:
        translog.emit(rec)  # (logging's handlers lock themselves: safe from this thread)
        metrics = getattr(self.handler, "metrics", None)
        if metrics is not None:
            metrics.observe(rec)


def preconditions(request: web.BaseRequest, target: Target) -> str | None:
    """RFC 9110 sec. 13.2.2: ``If-Match``, then ``If-None-Match``, against
    the target's current ETag (a file's; a collection has none) before the
    method acts: 412 when false; for GET and HEAD a matching If-None-Match
    is a 304, its ETag returned."""
    if_match, if_none = request.headers.get("If-Match"), request.headers.get("If-None-Match")
    if if_match is None and if_none is None:
        return None
    try:
        st: os.stat_result | None = os.stat(target.fs)
    except OSError:
        st = None
    tag = files.etag(st) if st is not None and stat.S_ISREG(st.st_mode) else None
    if (st is None and request.method != "PUT") or (tag is None and request.method in ("GET", "HEAD")):
        return None  # sec. 13.2.1: the method's own 404 or 405 comes first
    if if_match is not None and not _matches(if_match, st is not None, tag, weak=False):
        raise Problem(412, "If-Match names no current version of the target (RFC 9110 sec. 13.1.1).")
    if if_none is not None and _matches(if_none, st is not None, tag, weak=True):
        if request.method in ("GET", "HEAD") and tag is not None:
            return tag
        raise Problem(412, "If-None-Match: the target exists in a version it names (RFC 9110 sec. 13.1.2).")
    return None


def _matches(header: str, exists: bool, tag: str | None, weak: bool) -> bool:
    """An If-Match (strong comparison) or If-None-Match (weak) list against ``tag``."""
    if header.strip() == "*":
        return exists
    return tag is not None and any(t == tag and (weak or not w) for w, t in ETAGS.findall(header))


def _bearer(request: web.BaseRequest) -> str | None:
    """A bearer token: an ``Authorization: Bearer`` field, else ``?authz=``
    (dCache's and XRootD's form of a macaroon in a URL)."""
    for value in request.headers.getall("Authorization", []):
        scheme, _, token = value.strip().partition(" ")
        if scheme.lower() == "bearer" and token.strip():
            return token.strip()
    token = request.query.get("authz", "").strip()
    return token.removeprefix("Bearer%20").removeprefix("Bearer ") or None


def _role(request: web.BaseRequest) -> Role:
    return Role.RECEIVER if request.method == "PUT" else Role.SENDER


async def _small_body(ex: Exchange) -> bytes:
    """A PROPFIND body: at most dav.MAX_BODY bytes (413 past it)."""
    length = ex.request.content_length
    if length is not None and length > dav.MAX_BODY:
        raise Problem(413, f"a PROPFIND body may hold {dav.MAX_BODY} bytes at most.", {"Connection": "close"})
    chunks, size = [], 0
    while data := await ex.read():
        size += len(data)
        if size > dav.MAX_BODY:
            raise Problem(413, f"a PROPFIND body may hold {dav.MAX_BODY} bytes at most.", {"Connection": "close"})
        chunks.append(data)
    return b"".join(chunks)
