"""What a COPY pull (server/http/tpc/pull.py, answers.py) refuses to
store: a content-coded answer, a body with no length that a closed
connection ends, a source rewritten mid-pull (ETag, If-Match), a file
past --http-max-body; and what it leaves behind: no partial PUT's ranges
in the part file it truncated, no write in flight once its part file is
released.  -P auto's steering ends with the pull's streams, and a pull
whose streams all ended with a range missing fails rather than hangs."""

from __future__ import annotations

import asyncio
import contextlib
import ftplib
import gzip
import io
import os
import re
import socket
import threading
import types
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler

import pytest
from conftest import PASSWORD, USER, make_file, sha256_file
from httpserve import threaded
from tpcpeers import BASIC, Script, copy, curl, drsftp_peer, last_line, scripted
from xrootdserve import make_test_ca

from drsftp.http.steal import Plan
from drsftp.server.ftp import partfile
from drsftp.server.http.tpc import pull as P
from drsftp.tuning.count.streams import Action

MiB = 1 << 20
MAX_BODY = 4_000_000  # the second peer's --http-max-body


@dataclass
class Source:
    """A source that answers a GET as ``mode`` says: gzip (the body
    content-coded, whatever was asked), unsized (200, neither length nor
    chunks, the connection shut after ``cut`` bytes), chunked (200 in
    chunks, no length), versions (ranges; the first GET gets ``data``, the
    later ones ``new``, each with its ETag; ``honour``: If-Match is
    checked, 412)."""

    mode: str
    data: bytes
    new: bytes = b""
    cut: int = 0
    honour: bool = True
    requests: list = field(default_factory=list)


def _handler(src: Source):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args) -> None:
            return None

        def do_HEAD(self) -> None:
            self.send_response(200)
            self.send_header("Content-Length", str(len(src.data)))
            self.end_headers()

        def do_GET(self) -> None:
            src.requests.append(dict(self.headers))
            getattr(self, src.mode.replace("-", "_"))()

        def gzip(self) -> None:
            body = gzip.compress(src.data)
            self.send_response(200)
            self.send_header("Content-Encoding", "gzip")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def unsized(self) -> None:
            self.send_response(200)
            self.send_header("Connection", "close")
            self.end_headers()
            self.wfile.write(src.data[:src.cut])  # then the source dies
            self.wfile.flush()
            self.connection.shutdown(socket.SHUT_RDWR)
            self.close_connection = True

        def chunked(self) -> None:
            self.send_response(200)
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for i in range(0, len(src.data), 65536):
                piece = src.data[i:i + 65536]
                self.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
            self.wfile.write(b"0\r\n\r\n")

        def versions(self) -> None:
            first = len(src.requests) <= 1
            data, etag = (src.data, '"v1"') if first else (src.new, '"v2"')
            asked = self.headers.get("If-Match")
            if src.honour and asked is not None and asked != etag:
                self.send_response(412)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            m = re.fullmatch(r"bytes=(\d+)-(\d+)", self.headers.get("Range", ""))
            a, b = int(m.group(1)), min(int(m.group(2)), len(data) - 1)
            self.send_response(206)
            self.send_header("Content-Range", f"bytes {a}-{b}/{len(data)}")
            self.send_header("Content-Length", str(b - a + 1))
            self.send_header("ETag", etag)
            self.end_headers()
            with contextlib.suppress(OSError):  # (a pull that failed closes the connection)
                self.wfile.write(data[a:b + 1])

    return Handler


def source(src: Source):
    return threaded(_handler(src))


@pytest.fixture(scope="module")
def ca(tmp_path_factory):
    return make_test_ca(tmp_path_factory.mktemp("ca"))


@pytest.fixture(scope="module")
def peer(ca, tmp_path_factory):
    d = tmp_path_factory.mktemp("peer")
    with drsftp_peer(d / "b", ca, "--third-party-peers", "127.0.0.1", "--data-timeout", "3") as b:
        yield b


@pytest.fixture(scope="module")
def small(ca, tmp_path_factory):
    """A peer that stores MAX_BODY bytes at most (--http-max-body)."""
    d = tmp_path_factory.mktemp("small")
    with drsftp_peer(d / "b", ca, "--third-party-peers", "127.0.0.1", "--http-max-body", str(MAX_BODY)) as b:
        yield b


def test_a_content_coded_answer_fails_the_copy(peer, ca):
    data = b"".join(b"line %08d of a compressible text file\n" % i for i in range(30000))
    with source(Source("gzip", data)) as port:
        status, body = copy(ca, peer.url("z.txt"), f"Source: http://127.0.0.1:{port}/f", "X-Number-Of-Streams: 1")
    assert status == 202 and last_line(body).startswith("failure:") and "Content-Encoding: gzip" in body, body
    assert not (peer.root / "z.txt").exists()


def test_a_body_a_closed_connection_ends_fails_the_copy(peer, ca):
    """RFC 9112 sec. 6.3: a source that dies mid-body looks complete."""
    make_file(peer.root / "u.bin", 5000, seed=9)
    before = sha256_file(peer.root / "u.bin")
    with source(Source("unsized", os.urandom(MiB), cut=300_000)) as port:
        status, body = copy(ca, peer.url("u.bin"), f"Source: http://127.0.0.1:{port}/f", "X-Number-Of-Streams: 1")
    assert status == 202 and last_line(body).startswith("failure:") and "gave no length" in body, body
    assert sha256_file(peer.root / "u.bin") == before


@pytest.mark.parametrize("honour", [True, False], ids=["412", "etag-compared"])
def test_a_source_rewritten_mid_pull_is_not_spliced(peer, ca, honour):
    """The first range of one version, the second of another (same size):
    the later GET asks If-Match the first's ETag; a source that checks it
    answers 412, one that does not sends another ETag: either fails."""
    old, new = os.urandom(24 * MiB), os.urandom(24 * MiB)
    src = Source("versions", old, new, honour=honour)
    with source(src) as port:
        status, body = copy(ca, peer.url(f"v{honour}.bin"), f"Source: http://127.0.0.1:{port}/f",
                            "X-Number-Of-Streams: 2")
    assert status == 202 and last_line(body).startswith("failure:") and "changed during the copy" in body, body
    assert not (peer.root / f"v{honour}.bin").exists()
    assert "If-Match" not in src.requests[0] and all(r.get("If-Match") == '"v1"' for r in src.requests[1:])
    assert len(src.requests) >= 2


def test_a_file_past_max_body_is_not_pulled(small, ca):
    """--http-max-body binds a COPY as it does a PUT: a 206's size past it
    fails before a byte is written, a chunked body once it passes it; a
    chunked body within it is stored."""
    with scripted(Script(data=os.urandom(5 * MiB), ranges=True)) as port:
        status, body = copy(ca, small.url("m1.bin"), f"Source: http://127.0.0.1:{port}/f")
    assert status == 202 and last_line(body).startswith("failure:") and "--http-max-body" in body, body
    with source(Source("chunked", os.urandom(5 * MiB))) as port:
        status, body = copy(ca, small.url("m2.bin"), f"Source: http://127.0.0.1:{port}/f", "X-Number-Of-Streams: 1")
    assert status == 202 and last_line(body).startswith("failure:") and "--http-max-body" in body, body
    assert not (small.root / "m1.bin").exists() and not (small.root / "m2.bin").exists()
    assert (small.root / ".m2.bin.part").stat().st_size <= MAX_BODY
    data = os.urandom(MiB)
    with source(Source("chunked", data)) as port:
        status, body = copy(ca, small.url("m3.bin"), f"Source: http://127.0.0.1:{port}/f", "X-Number-Of-Streams: 1")
    assert status == 202 and last_line(body) == "success: Created", body
    assert (small.root / "m3.bin").read_bytes() == data


def _put_range(ca, url, data, a, b, tmp):
    piece = tmp / f"piece{a}"
    piece.write_bytes(data[a:b])
    r = curl(ca, "-X", "PUT", "-H", f"Authorization: {BASIC}", "-H", f"Content-Range: bytes {a}-{b - 1}/{len(data)}",
             "--data-binary", f"@{piece}", "-w", "\n%{http_code}", url)
    return int(r.stdout.rpartition("\n")[2])


def test_a_pull_leaves_no_partial_puts_ranges_in_its_part_file(peer, ca, tmp_path):
    """Half a file by a partial PUT, then a pull into the same name that
    fails (its part file truncated, partly rewritten): the upload's resumed
    second half is not taken for the whole file (202, not 201)."""
    x, y = os.urandom(2 * MiB), os.urandom(2 * MiB)
    url = peer.url("x.bin")
    assert _put_range(ca, url, x, 0, MiB, tmp_path) == 202
    with scripted(Script(data=y, mode="kill", cut=MiB + MiB // 2)) as port:
        status, body = copy(ca, url, f"Source: http://127.0.0.1:{port}/y")
    assert status == 202 and last_line(body).startswith("failure:"), body
    assert _put_range(ca, url, x, MiB, 2 * MiB, tmp_path) == 202
    assert not (peer.root / "x.bin").exists()


def test_an_ftp_stor_leaves_no_partial_puts_ranges_in_its_part_file(peer, ca, tmp_path):
    """The same over FTP: half a file by a partial PUT, then a STOR of
    another file into the same name that ends short of its ALLO (its part
    file kept for REST): the PUT's resumed second half gets 202."""
    x, y = os.urandom(2 * MiB), os.urandom(2 * MiB)
    url = peer.url("f.bin")
    assert _put_range(ca, url, x, 0, MiB, tmp_path) == 202
    with ftplib.FTP() as ftp:
        ftp.connect("127.0.0.1", peer.srv.port, timeout=30)
        ftp.login(USER, PASSWORD)
        ftp.voidcmd(f"ALLO {2 * MiB}")
        with pytest.raises(ftplib.Error, match="451"):
            ftp.storbinary("STOR f.bin", io.BytesIO(y[:MiB + MiB // 2]))
    assert (peer.root / ".f.bin.part").stat().st_size == MiB + MiB // 2
    assert _put_range(ca, url, x, MiB, 2 * MiB, tmp_path) == 202
    assert not (peer.root / "f.bin").exists()


class _Stripe:
    def __init__(self, i):
        self.index, self.done, self.ending, self.moved, self.link = i, False, False, 0, None

    def give_back(self):
        self.done = True


class _Auto:
    """-P auto's controller, its interval an hour (a source's DRS report may
    say any RTT), REMOVE at its ``remove``-th look, else HOLD."""

    def __init__(self, streams: int, interval: float, remove: int = 0):
        self.cap, self.streams, self.every, self.remove, self.looks = streams, streams, interval, remove, 0

    def first(self, stripe):
        return self.streams

    def interval(self, stripes):
        return self.every

    def update(self, *args):
        self.looks += 1
        return Action.REMOVE if self.looks == self.remove else Action.HOLD

    def refused(self, *args):
        pass


class _NoWarm:
    def __contains__(self, i):
        return False

    async def ready(self, i):
        return None

    def take(self):
        return None


class _Job(types.SimpleNamespace):
    moved = property(lambda self: sum(s.moved for s in self.stripes))


def _resp():
    return types.SimpleNamespace(release=lambda: None, close=lambda: None)


def _job(total):
    job = _Job(stripes=[_Stripe(0)], total=total, target=types.SimpleNamespace(href="/t"), guard=None)
    job.stripe = lambda i, cfg, guard: (job.stripes.append(_Stripe(i)), job.stripes[-1])[1]
    return job


def test_an_auto_pull_ends_with_its_streams(monkeypatch):
    """The steering sleeps an hour between looks: the pull ends when its
    streams did (pull._Pull.run), not at the steering's next look."""
    async def body(job, stripe, resp, fd, span, asked, exact=True):
        await asyncio.sleep(0)
        stripe.moved += span.end - span.at
        span.at = span.end

    monkeypatch.setattr(P, "_body", body)
    monkeypatch.setattr(P, "_range", lambda *a: asyncio.sleep(0, _resp()))

    async def go():
        job = _job(64 * MiB)
        plan = Plan(16 * MiB, 64 * MiB, 64 * MiB)
        pull = P._Pull(job, -1, None, plan, _Auto(1, 3600.0), _NoWarm())
        await asyncio.wait_for(pull.run(_resp(), plan.open(0, 16 * MiB)), 30)
        return plan.missing, job.moved

    assert asyncio.run(go()) == (0, 64 * MiB)


def test_an_auto_pull_whose_streams_all_ended_with_a_range_missing_fails(monkeypatch):
    """Two streams; the steering ends the second (REMOVE), and the first's
    next request is refused (503) while the second still runs: the first
    ends and gives its range back, the second ends after its cut range;
    nothing runs with bytes missing: the pull fails, it does not wait for
    its steering forever."""
    calls = []

    async def body(job, stripe, resp, fd, span, asked, exact=True):
        for _ in range(3000):  # (the first reads once the second is ending, the second once the first was refused)
            if any(s.ending for s in job.stripes) and (stripe.index == 0 or len(calls) >= 2):
                break
            await asyncio.sleep(0.01)
        stripe.moved += span.end - span.at
        span.at = span.end

    async def ranged(job, stripe, start, end):
        calls.append(stripe.index)
        if stripe.index == 0:
            raise P.SourceBusy("the source answered 503")
        return _resp()

    monkeypatch.setattr(P, "_body", body)
    monkeypatch.setattr(P, "_range", ranged)

    async def go():
        job = _job(64 * MiB)
        plan = Plan(16 * MiB, 64 * MiB, 64 * MiB)
        pull = P._Pull(job, -1, None, plan, _Auto(2, 0.05, remove=1), _NoWarm())
        await asyncio.wait_for(pull.run(_resp(), plan.open(0, 16 * MiB)), 30)

    with pytest.raises(P.CopyFailed, match="not fetched"):
        asyncio.run(go())
    assert calls == [1, 0]


def test_a_cancelled_pull_keeps_its_part_file_until_its_write_returned(monkeypatch, tmp_path):
    """A write on a thread cannot be cancelled: the cancelled pull holds
    its part file (open, claimed) until the write returned, so the next
    COPY's O_TRUNC cannot be followed by this one's late write."""
    started, go_on = threading.Event(), threading.Event()

    def write(fd, buffers, at):
        started.set()
        go_on.wait(30)
        return os.pwritev(fd, buffers, at)

    async def fill(job, fd, cfg):
        await P._threaded(job, write, fd, [b"late"], 0)

    monkeypatch.setattr(P, "_fill", fill)
    target = types.SimpleNamespace(fs=str(tmp_path / "c.bin"), href="/c.bin")
    job = types.SimpleNamespace(part=partfile.part_path(target.fs), target=target, verify=False, threads=set(),
                                total=None, moved=0)
    cfg = types.SimpleNamespace(ledger=None)

    async def go():
        task = asyncio.ensure_future(P.pull(job, cfg))
        for _ in range(3000):
            if started.is_set():
                break
            await asyncio.sleep(0.01)
        task.cancel()
        for _ in range(20):  # (the old pull closed its part file and released it within a few turns)
            await asyncio.sleep(0.01)
        held = not task.done() and partfile.busy(job.part)
        go_on.set()
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.wait_for(task, 30)
        return held, partfile.busy(job.part)

    try:
        assert asyncio.run(go()) == (True, False)
    finally:
        go_on.set()
    assert (tmp_path / ".c.bin.part").read_bytes() == b"late"
