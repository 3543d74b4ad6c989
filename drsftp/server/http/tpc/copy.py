"""``COPY``: an HTTP third-party copy, pull or push (docs/HTTP.md,
"Third-party copy"; headers: http/copyreq.py).

Everything the server can check alone is checked before the answer: the
login's rights on the request's path, the headers, the remote against
--third-party-peers (guard.py: 403), the target (``Overwrite: F`` and an
existing file: 412; a part file being written: 409).  Then ``202
Accepted`` with a ``text/perf-marker-stream`` body: a marker per stripe at
once and every MARKER_EVERY seconds (http/perfmarker.py), and the last
line, ``success: Created`` or ``failure: <reason>``.  A client that goes
away cancels the copy.  The copy runs on the authorisation it started
with: a token that expires meanwhile does not stop it (the convention's
reading, and FTS3's, whose token lifetimes are sized to the transfer
timeout, not to a single request).  Each copy is one transfer log line
(``put`` for a pull, ``get`` for a push, ``data_peer`` and ``remote``
naming the other end).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import ssl
import time
from dataclasses import dataclass, field

from aiohttp import web

from ....http import copyreq, perfmarker
from ....tuning import Role
from ...ftp import partfile
from ...peers import PeerList
from ..drs import Exchange, Settings
from ..paths import Target
from ..problem import Problem
from ..uploads import Ledger
from .guard import Guard, Remote
from .links import Links
from .remote import Stripe

log = logging.getLogger("drsftp.server")

MARKER_EVERY = 5.0  # s between perf markers (XRootD's and dCache's period)


class CopyFailed(Exception):
    """The copy cannot complete: the failure line's reason."""


@dataclass
class Settings4Copy:
    peers: PeerList
    tls: ssl.SSLContext
    max_streams: int
    timeout: float | None
    drs: Settings
    links: Links  # the server's kept-alive connections to remotes (links.py)
    max_body: int | None = None  # --http-max-body: a pull stores no larger file than a PUT may
    ledger: Ledger | None = None  # the partial PUTs' ranges (uploads.py): a pull's part file holds none of them


@dataclass
class Job:
    push: bool
    target: Target
    remote: Remote
    headers: list[tuple[str, str]]  # forwarded to the remote (TransferHeader*)
    overwrite: bool
    verify: bool
    streams: int  # at most so far, with ``auto``
    guard: Guard
    auto: bool = False  # a pull whose COPY named no streams: the server chooses (auto.py)
    stripes: list[Stripe] = field(default_factory=list)
    total: int | None = None
    drs_peer: bool = False
    validator: tuple[str, str] | None = None  # the first answer's (ETag or Last-Modified, its value): pull.py
    threads: set[asyncio.Future] = field(default_factory=set)  # the part file's writes in flight (pull.py)

    @property
    def part(self) -> str:
        return partfile.part_path(self.target.fs)

    @property
    def moved(self) -> int:
        return sum(s.moved for s in self.stripes)

    def stripe(self, index: int, cfg: Settings4Copy, guard: Guard) -> Stripe:
        return self.join(self.new_stripe(index, cfg, guard))

    def new_stripe(self, index: int, cfg: Settings4Copy, guard: Guard) -> Stripe:
        """A stripe of this copy, not yet one of its streams (:meth:`join`)."""
        return Stripe(index, Role.SENDER if self.push else Role.RECEIVER, cfg.drs, guard, cfg.tls, cfg.timeout,
                      cfg.links, cfg.max_streams)

    def join(self, stripe: Stripe) -> Stripe:
        """``stripe`` one of the copy's streams (its markers count it)."""
        self.stripes.append(stripe)
        self.streams = max(self.streams, len(self.stripes))
        return stripe


def plan(request: web.BaseRequest, target: Target, max_streams: int) -> tuple[bool, str]:
    """(push, the remote URL) of a COPY; 400 for what cannot be honoured."""
    source, dest = request.headers.get("Source"), request.headers.get("Destination")
    if bool(source) == bool(dest):
        raise Problem(400, "COPY needs one of Source (pull into this path) or Destination (push this file).")
    try:
        copyreq.credential(request.headers.get("Credential"))
    except copyreq.CopyHeaderError as exc:
        raise Problem(400, f"{exc}.") from None
    if not target.parts:
        raise Problem(409, "the home is a collection: COPY names a file.")
    return dest is not None, (dest or source or "").strip()


async def start(request: web.BaseRequest, ex: Exchange, target: Target, cfg: Settings4Copy, push: bool,
                url: str, who: str) -> Job:
    h = request.headers
    try:
        headers = copyreq.transfer_headers(h.items())
        overwrite = copyreq.overwrite(h.get("Overwrite"))
        verify = copyreq.flag("RequireChecksumVerification", h.get("RequireChecksumVerification"))
        asked = h.get("X-Number-Of-Streams")
        streams = 1 if push else copyreq.streams(asked, cfg.max_streams)
        auto = not push and (asked is None or not asked.strip() or int(asked) == 0)
    except copyreq.CopyHeaderError as exc:
        raise Problem(400, f"{exc}.") from None
    guard = Guard(cfg.peers, who)
    remote = await guard.check(url, "destination" if push else "source")
    job = Job(push, target, remote, headers, overwrite, verify, streams, guard, auto=auto)
    if push:
        if not os.path.isfile(target.fs):
            raise Problem(404, "no such file to push.")
    else:
        if not os.path.isdir(target.parent.fs):
            raise Problem(409, "the parent collection does not exist (MKCOL it first).")
        if os.path.isdir(target.fs):
            raise Problem(409, "a collection has that name: a file cannot be copied over it.")
        if not overwrite and os.path.lexists(target.fs):
            raise Problem(412, "the target exists and Overwrite is F.")
    return job


async def run(request: web.BaseRequest, ex: Exchange, job: Job, engine, cfg: Settings4Copy) -> web.StreamResponse:
    """The 202 and its perf markers while ``engine(job, cfg)`` copies."""
    resp = web.StreamResponse(status=202, headers={"Content-Type": perfmarker.CONTENT_TYPE, **ex.headers})
    resp.headers["Cache-Control"] = "no-cache"
    await ex._bounded(resp.prepare(request))
    ex.began = True
    for i in range(1 if job.auto else job.streams):
        job.stripe(i, cfg, job.guard)
    task = asyncio.ensure_future(engine(job, cfg))
    try:
        while True:
            await ex._bounded(resp.write(_markers(job).encode()))
            done, _ = await asyncio.wait({task}, timeout=MARKER_EVERY)
            if done:
                break
        try:
            task.result()
            last = perfmarker.SUCCESS + "\n"
            ex.complete = True
        except CopyFailed as exc:
            last = perfmarker.failure(str(exc))
        except Exception as exc:  # (any other: its class says enough, and the log has it)
            log.warning("http: COPY %s: %s", job.target.href, exc, exc_info=True)
            last = perfmarker.failure(f"the server failed: {type(exc).__name__}: {exc}")
        if not ex.complete:
            log.info("http: COPY %s %s %s: %s", job.target.href, "to" if job.push else "from", job.remote.shown,
                     last.strip())
        # the last figures, the outcome and the body's end in one write (one TLS record and send)
        await ex._bounded(resp.write_eof((_markers(job) + last).encode()))
    except (OSError, asyncio.CancelledError) as exc:  # the client went away: so does the copy
        task.cancel()
        with contextlib.suppress(BaseException):
            await task
        if isinstance(exc, asyncio.CancelledError):
            raise
        log.info("http: COPY %s: the client went away: %s", job.target.href, exc)
        resp.force_close()
    finally:
        job.drs_peer = any(s.drs_peer for s in job.stripes)
        ex.received = ex.sent = job.moved
    return resp


def _markers(job: Job) -> str:
    now = int(time.time())
    out = []
    for i, s in enumerate(job.stripes):
        remote = () if s.remote is None else (perfmarker.remote_connection(*s.remote),)
        out.append(perfmarker.format_marker(perfmarker.Marker(now, i, s.moved, len(job.stripes), remote)))
    return "".join(out)


async def close(job: Job) -> None:
    for s in job.stripes:
        with contextlib.suppress(Exception):
            await s.close()
