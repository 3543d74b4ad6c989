"""One file's HTTP third-party copy, driven from the client (docs/HTTP.md,
"drsftp copy over HTTPS"; the WLCG HTTP-TPC convention).

A pull sends ``COPY`` to the destination with ``Source:`` (it GETs the
file), a push sends it to the source with ``Destination:`` (it PUTs
there).  The endpoint that gets the COPY is logged in to as for a get or
put (Basic); the other end's credentials go in
``TransferHeaderAuthorization`` (tokens.py).  The answer is ``202`` and a
perf-marker stream, read as it comes (markers.py): progress from the
markers summed over the stripes, then ``success:`` or ``failure:``.  A
stream silent for --timeout seconds is given up; closing the COPY's
connection (Ctrl-C, --max-time) makes the server cancel the copy.
``--verify`` asks the server to compare (``RequireChecksumVerification``)
and compares both sides' ``Digest`` (RFC 3230) again here afterwards."""

from __future__ import annotations

import asyncio
import logging
import posixpath
import re
import time
from dataclasses import dataclass

import aiohttp

from ....http.digest import ALIASES, parse_digest
from ....http.statuses import status_sentence
from ...result import TransferResult
from ...transfer.options import Deadline
from ...transfer.progress import ProgressView
from ..errors import HTTPError, connection_error, redirect_error
from ..pool import Pool
from .markers import MarkerReader, Rate
from .tokens import RemoteAuth

log = logging.getLogger("drsftp.client")

WANT = "sha-256, adler32;q=0.5, md5;q=0.3"  # preference order (RFC 3230 sec. 4.3.1)
ANY_STATUS = tuple(range(100, 600))  # (the COPY's refusal is read here: its sentence names the cause)
MAX_REFUSAL = 2048  # bytes of a refusal's body read for its sentence
SLACK = 5.0  # s the session's own read timeout waits past --timeout (the marker wait speaks first)
# after the outcome line, the body's end is read (a response released before its end closes its connection:
# a tree's next COPY would pay a TCP and TLS handshake)
MAX_TRAILER = 4096  # bytes read after the last line at most
END_WAIT = 5.0  # s
BUSY = 503  # Service Unavailable: "too many connections" (RFC 9110 sec. 15.6.4)
BUSY_REASON = re.compile(r"\banswered 503\b|\b503 Service Unavailable\b")


@dataclass
class Ends:
    """The two endpoints: a pool each (their logins), the direction, and
    the remote side's credentials for the TransferHeaderAuthorization."""

    src: Pool
    dst: Pool
    push: bool
    auth: RemoteAuth

    @property
    def active(self) -> Pool:
        """The endpoint the COPY goes to."""
        return self.src if self.push else self.dst

    @property
    def mode(self) -> str:
        return "push" if self.push else "pull"


@dataclass
class Settings:
    streams: int | None  # X-Number-Of-Streams (None: -P auto, the server's choice)
    verify: bool
    timeout: float  # s without a marker line before the copy is given up
    overwrite: bool = True
    deadline: Deadline | None = None  # --max-time
    progress: bool | None = False


def copy_headers(ends: Ends, src_path: str, dst_path: str, s: Settings, remote_auth: str | None) -> dict[str, str]:
    """The COPY's headers (drsftp/http/copyreq.py reads them on the server)."""
    other = ends.dst.loc.url(dst_path) if ends.push else ends.src.loc.url(src_path)
    h = {"Destination" if ends.push else "Source": other, "Credential": "none",
         "Overwrite": "T" if s.overwrite else "F"}
    if s.streams is not None and not ends.push:  # (a push is one PUT: the header means nothing there)
        h["X-Number-Of-Streams"] = str(s.streams)
    if s.verify:
        h["RequireChecksumVerification"] = "true"
    if remote_auth is not None:
        h["TransferHeaderAuthorization"] = remote_auth
    return h


async def source_size(pool: Pool, path: str) -> int | None:
    """The source's size (HEAD), which also says at once that it exists."""
    async with pool.request("HEAD", path, ok=(200, 204)) as (resp, _):
        return resp.content_length


async def copy_file(ends: Ends, src_path: str, dst_path: str, s: Settings, size: int | None = None,
                    head: bool = True) -> TransferResult:
    """One COPY: its figures (``complete`` False when --max-time stopped it);
    a refusal, a failure marker or a silent stream is an HTTPError."""
    if head:
        size = await source_size(ends.src, src_path)
    auth = await ends.auth.header()
    pool = ends.active
    path = src_path if ends.push else dst_path
    headers = copy_headers(ends, src_path, dst_path, s, auth)
    if ends.push and s.streams is not None and s.streams > 1:
        log.info("a push is one PUT on one connection: -P %d is for pulls", s.streams)
    reader, rate = MarkerReader(), Rate()
    view = ProgressView(posixpath.basename(src_path) or src_path, size, s.progress)
    began = time.monotonic()
    stopped = False
    try:
        async with pool.request("COPY", path, ok=ANY_STATUS, headers=headers) as (resp, _):
            if not 200 <= resp.status < 300:
                raise await refusal(pool, "COPY", path, resp)
            if resp.status == 202:
                stopped = await read_markers(pool, path, resp, reader, s, view, rate, began)
            else:  # (a server that copied before answering: no markers)
                reader.outcome.result = f"success: {resp.reason or resp.status}"
    finally:
        view.close()
    seconds = time.monotonic() - began
    reason = reader.failure()
    if reason is not None:  # (a remote's 503, named in the reason: the server's connection refused, tree.py)
        raise HTTPError(f"the {ends.mode} of {ends.src.loc.url(src_path)} to {ends.dst.loc.url(dst_path)}"
                        f" failed: {reason}", BUSY if BUSY_REASON.search(reason) else None, transient=False)
    result = figures(ends, src_path, dst_path, s, reader, size, seconds, stopped)
    if s.verify and not stopped:
        result.update(digest=await verify_both(ends, src_path, dst_path))
    return result


async def read_markers(pool: Pool, path: str, resp: aiohttp.ClientResponse, reader: MarkerReader, s: Settings,
                       view: ProgressView, rate: Rate, began: float) -> bool:
    """The stream until its last line; True when --max-time stopped it first."""
    url = pool.loc.url(path)
    try:
        while not reader.done:
            wait = s.timeout
            if s.deadline is not None:
                if s.deadline.passed:
                    resp.close()  # (the server cancels the copy when its client goes away)
                    return True
                wait = min(wait, s.deadline.left())
            try:
                line = await asyncio.wait_for(resp.content.readline(), wait)
            except TimeoutError:
                if s.deadline is not None and s.deadline.passed:
                    continue
                raise HTTPError(f"COPY {url}: no perf marker for {s.timeout:g} s (--timeout): the copy was given"
                                " up", transient=True) from None
            if not line:
                raise HTTPError(f"COPY {url}: the server ended the perf-marker stream without success or failure",
                                transient=True)
            try:
                if reader.feed(line.decode("utf-8", "replace")) and not reader.done:
                    now = time.monotonic()
                    view.update(reader.transferred, rate.add(now - began, reader.transferred), None, None)
            except ValueError as exc:
                raise HTTPError(f"COPY {url}: the perf-marker stream is not valid: {exc}", transient=False) from None
    except BaseException:
        resp.close()  # (never kept alive with a copy behind it)
        raise
    try:
        await asyncio.wait_for(resp.content.read(MAX_TRAILER), END_WAIT)
    except (TimeoutError, aiohttp.ClientError, OSError):  # (the copy is done: only the connection is not kept)
        resp.close()
    return False


async def refusal(pool: Pool, method: str, path: str, resp: aiohttp.ClientResponse) -> HTTPError:
    """A refused COPY's sentence: the status's, and the server's own (a
    drsftp server names its cause, e.g. --third-party-peers)."""
    said = ""
    if resp.headers.get("Content-Type", "").lower().startswith("text/"):
        try:
            body = await resp.content.read(MAX_REFUSAL)
        except (aiohttp.ClientError, OSError) as exc:
            raise connection_error(pool.loc.at(path), exc) from exc
        first = body.decode("utf-8", "replace").strip().splitlines()[:1]
        said = "".join(c for c in (first[0] if first else "")[:300] if c.isprintable()).strip()
    what = f"{method} {pool.loc.url(path)}"
    if 300 <= resp.status < 400:
        return redirect_error(what, pool.loc.url(path), resp.status, resp.headers.get("Location"))
    text = status_sentence(resp.status, resp.reason)
    if said and said.lower() not in text.lower():
        text = f"{text}: {said.rstrip('.')}"
    return HTTPError(f"{what}: {text}", resp.status)


def figures(ends: Ends, src_path: str, dst_path: str, s: Settings, reader: MarkerReader, size: int | None,
            seconds: float, stopped: bool) -> TransferResult:
    """--json's record: the bytes (the file's size once it succeeded: the
    last marker may lag), the markers' own figures beside."""
    moved = reader.transferred
    if not stopped and size is not None:
        moved = max(moved, size)
    r = TransferResult(direction="copy", path=src_path, bytes=moved, seconds=seconds, total_size=size,
                       complete=not stopped)
    r.update(mode=ends.mode, via="http-tpc", source=ends.src.loc.url(src_path),
             destination=ends.dst.loc.url(dst_path), dest_path=dst_path, streams=reader.stripes or None,
             parallel="auto" if s.streams is None else s.streams, marker_bytes=reader.transferred,
             markers=reader.markers, remote_connections=list(reader.remote), token=ends.auth.kind,
             result=reader.outcome.result, drs_peer=None)
    if stopped:
        r.update(note="stopped at --max-time: the server cancels the copy")
    return r


# -- --verify ---------------------------------------------------------------

async def digests(pool: Pool, path: str, want: str) -> dict[str, str]:
    """The ``Digest`` a HEAD with ``Want-Digest: want`` is answered (names as registered)."""
    async with pool.request("HEAD", path, ok=(200, 204), headers={"Want-Digest": want}) as (resp, _):
        return {ALIASES.get(k, k): v for k, v in parse_digest(resp.headers.get("Digest", "")).items()}


async def verify_both(ends: Ends, src_path: str, dst_path: str) -> str:
    """Both sides' digests compared; ``name=value`` when equal.  Each is
    asked the preference list, then (if their answers share no algorithm)
    the one the other answered."""
    a, b = await asyncio.gather(digests(ends.src, src_path, WANT), digests(ends.dst, dst_path, WANT))
    if a and b and not set(a) & set(b):
        b.update(await digests(ends.dst, dst_path, next(iter(a))))
        if not set(a) & set(b):
            a.update(await digests(ends.src, src_path, next(iter(b))))
    return compare_digests(a, b, ends.src.loc.url(src_path), ends.dst.loc.url(dst_path))


def compare_digests(src: dict[str, str], dst: dict[str, str], src_url: str, dst_url: str) -> str:
    """``name=value`` of the first algorithm (sha-256, adler32, md5) both
    name, equal; one sentence (an HTTPError) otherwise."""
    common = [n for n in ("sha-256", "adler32", "md5") if n in src and n in dst]
    if not common:
        missing = dst_url if src else src_url
        raise HTTPError(f"--verify: {missing} offers no digest the other side offers (Want-Digest); the copy"
                        " was not verified", transient=False)
    name = common[0]
    if src[name] != dst[name]:
        raise HTTPError(f"verification failed: {name} {src[name][:16]}... at {src_url}, {dst[name][:16]}... at"
                        f" {dst_url}", transient=False)
    return f"{name}={src[name]}"


def stream_timeout(timeout: float) -> float:
    """The session's own read timeout for the COPY's pool: past --timeout,
    so the marker wait (one sentence naming --timeout) speaks first."""
    return timeout + SLACK

