"""drsftp's client over HTTP (drsftp/client/http/, docs/HTTP.md "Client")
against a small aiohttp server of the test's own (tests/httpfake.py):
bytes compared by SHA-256 in every transfer."""

from __future__ import annotations

import gzip
import http.server
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time

import pytest
from conftest import drsftp
from httpfake import PASSWORD, USER, FakeServer, sha256
from httpserve import threaded
from tlscerts import make_certs

from drsftp.cli import main

SIZE = 5_000_000


@pytest.fixture
def server(tmp_path):
    root = tmp_path / "root"
    root.mkdir()
    with open(root / "big.bin", "wb") as f:
        f.write(os.urandom(SIZE))
    s = FakeServer(str(root)).start()
    yield s
    s.stop()


def run(*argv: str) -> int:
    """``drsftp ARGV`` in this process (get and put with -q); exit 2 of argparse's as its code."""
    extra = ["-q"] if argv[0] != "ls" else []
    try:
        return main([argv[0], *extra, *argv[1:]])
    except SystemExit as exc:
        return int(exc.code or 0)


@pytest.mark.parametrize("streams", ["1", "4", "auto"])
def test_get_is_byte_exact_and_speaks_drs(server, tmp_path, streams):
    out, report = tmp_path / "out.bin", tmp_path / "r.json"
    assert run("get", server.url("/big.bin"), str(out), "-P", streams, "--json", str(report)) == 0
    assert sha256(out) == sha256(os.path.join(server.root, "big.bin"))
    assert not os.path.exists(f"{out}.part") and not os.path.exists(f"{out}.part.ranges")
    r = json.loads(report.read_text())
    assert r["drs_peer"] is True and r["bytes"] == SIZE and r["server_last_report"] == {"rtt": 1000, "rate": 5000}
    assert r["peak_rcvbuf"]  # a tuner attached to the connection's socket
    gets = [h for m, _, h in server.seen if m == "GET"]
    assert gets and all("DRS" in h and h["Range"].startswith("bytes=") for h in gets)
    if streams == "4":
        assert len(gets) >= 4 and r["streams"] >= 2


def test_get_without_drs_answers_reports_no_peer(server, tmp_path):
    server.drs = False
    report = tmp_path / "r.json"
    assert run("get", server.url("/big.bin"), str(tmp_path / "o"), "--json", str(report)) == 0
    assert json.loads(report.read_text())["drs_peer"] is False


def test_get_from_a_server_without_ranges_reads_it_whole(server, tmp_path):
    server.ranges = False
    out = tmp_path / "o"
    assert run("get", server.url("/big.bin"), str(out), "-P", "4") == 0
    assert sha256(out) == sha256(os.path.join(server.root, "big.bin"))
    assert [h.get("Range") for m, _, h in server.seen if m == "GET"] == [None]


def test_unannounced_ranges_are_tried_and_then_used_on_n_connections(server, tmp_path):
    """A HEAD without Accept-Ranges (XRootD's): the first range goes alone
    (RFC 9110 sec. 14.3); its 206 starts the other connections."""
    server.announce_ranges = False
    out, report = tmp_path / "o", tmp_path / "r.json"
    assert run("get", server.url("/big.bin"), str(out), "-P", "4", "--json", str(report)) == 0
    assert sha256(out) == sha256(os.path.join(server.root, "big.bin"))
    ranges = [h.get("Range", "") for m, _, h in server.seen if m == "GET"]
    assert len(ranges) >= 4 and all(re.fullmatch(r"bytes=\d+-\d+", r) for r in ranges)  # closed: XRootD's bug
    r = json.loads(report.read_text())
    assert r["streams"] == 4 and r["requests"] == len(ranges) and r["connections"] >= 4


def test_a_200_to_an_unannounced_range_is_read_whole_in_that_answer(server, tmp_path):
    server.announce_ranges, server.ranges = False, False
    out, report = tmp_path / "o", tmp_path / "r.json"
    assert run("get", server.url("/big.bin"), str(out), "-P", "4", "--json", str(report)) == 0
    assert sha256(out) == sha256(os.path.join(server.root, "big.bin"))
    assert [m for m, _, _ in server.seen] == ["HEAD", "GET"]  # no second request
    r = json.loads(report.read_text())
    assert (r["streams"], r["requests"], r["bytes"]) == (1, 1, SIZE)


def test_continue_over_unannounced_ranges_fetches_the_rest_or_starts_over_on_a_200(server, tmp_path, caplog):
    server.announce_ranges, server.cut_after = False, 1_000_000
    out = tmp_path / "o"
    assert run("get", server.url("/big.bin"), str(out), "-P", "1") == 1
    assert os.path.exists(f"{out}.part.ranges")
    server.cut_after = None
    server.seen.clear()
    report = tmp_path / "r.json"
    assert run("get", server.url("/big.bin"), str(out), "-P", "1", "--continue", "--json", str(report)) == 0
    assert sha256(out) == sha256(os.path.join(server.root, "big.bin"))
    assert [h["Range"] for m, _, h in server.seen if m == "GET"] == [f"bytes=1000000-{SIZE - 1}"]
    assert json.loads(report.read_text())["resumed_from"] == 1_000_000
    os.unlink(out)  # again, from a server that turns out to send the whole file
    server.cut_after = 1_000_000
    assert run("get", server.url("/big.bin"), str(out), "-P", "1") == 1
    server.cut_after, server.ranges = None, False
    assert run("get", server.url("/big.bin"), str(out), "-P", "1", "--continue", "--json", str(report)) == 0
    assert sha256(out) == sha256(os.path.join(server.root, "big.bin"))
    r = json.loads(report.read_text())
    assert (r["resumed_from"], r["bytes"]) == (0, SIZE)
    assert "does not serve byte ranges: --continue starts over" in caplog.text
    assert not os.path.exists(f"{out}.part") and not os.path.exists(f"{out}.part.ranges")


@pytest.mark.parametrize("streams", ["1", "4"])
def test_get_continue_after_a_cut_fetches_only_the_rest(server, tmp_path, capsys, streams):
    out = tmp_path / "o"
    server.cut_after = 1_000_000
    assert run("get", server.url("/big.bin"), str(out), "-P", streams) == 1
    assert "closed the connection" in capsys.readouterr().err or os.path.exists(f"{out}.part")
    assert os.path.exists(f"{out}.part") and os.path.exists(f"{out}.part.ranges") and not out.exists()
    server.cut_after = None
    server.seen.clear()
    report = tmp_path / "r.json"
    assert run("get", server.url("/big.bin"), str(out), "-P", streams, "--continue", "--json", str(report)) == 0
    assert sha256(out) == sha256(os.path.join(server.root, "big.bin"))
    r = json.loads(report.read_text())
    assert r["resumed_from"] >= 900_000 and r["bytes"] == SIZE - r["resumed_from"]  # what arrived was kept
    if streams == "1":
        assert [h["Range"] for m, _, h in server.seen if m == "GET"] == [f"bytes=1000000-{SIZE - 1}"]


def test_get_continue_of_a_complete_file_moves_nothing(server, tmp_path):
    out = tmp_path / "o"
    assert run("get", server.url("/big.bin"), str(out)) == 0
    server.seen.clear()
    assert run("get", server.url("/big.bin"), str(out), "--continue") == 0
    assert [m for m, _, _ in server.seen] == ["HEAD"]


def test_verify_good_and_bad(server, tmp_path, capsys):
    out, report = tmp_path / "o", tmp_path / "r.json"
    assert run("get", server.url("/big.bin"), str(out), "--verify", "--json", str(report)) == 0
    assert json.loads(report.read_text())["sha256"] == sha256(out)
    server.bad_digest = True
    bad = tmp_path / "bad"
    assert run("get", server.url("/big.bin"), str(bad), "--verify") == 1
    err = capsys.readouterr().err
    assert "verification failed: sha-256" in err and err.count("\n") == 1 and "Traceback" not in err
    assert not bad.exists() and os.path.exists(f"{bad}.part")  # the part is kept
    assert run("put", str(out), server.url("/up.bin"), "--verify") == 1
    assert "verification failed" in capsys.readouterr().err


@pytest.mark.parametrize("algorithm", ["adler32", "md5"])
def test_verify_falls_back_to_what_the_server_offers(server, tmp_path, capsys, algorithm):
    server.offered = (algorithm,)
    report = tmp_path / "r.json"
    assert run("get", server.url("/big.bin"), str(tmp_path / "o"), "--verify", "--json", str(report)) == 0
    r = json.loads(report.read_text())
    assert r["digest"].startswith(f"{algorithm}=") and r["sha256"] is None
    server.bad_digest = True
    assert run("get", server.url("/big.bin"), str(tmp_path / "o2"), "--verify") == 1
    assert f"verification failed: {algorithm}" in capsys.readouterr().err


def test_verify_without_a_digest_is_an_error(server, tmp_path, capsys):
    server.no_digest = True
    assert run("get", server.url("/big.bin"), str(tmp_path / "o"), "--verify") == 1
    assert "no digest" in capsys.readouterr().err


@pytest.mark.parametrize("streams", ["1", "4"])
def test_put_is_byte_exact(server, tmp_path, streams):
    src = os.path.join(server.root, "big.bin")
    assert run("put", src, server.url("/sub/"), "-P", streams) == 1  # no such directory: 409
    assert run("put", src, server.url("/up.bin"), "-P", streams, "--verify") == 0
    assert sha256(os.path.join(server.root, "up.bin")) == sha256(src)
    puts = [h for m, _, h in server.seen if m == "PUT"]
    assert all("DRS" in h for h in puts)
    if streams == "4":
        assert len(puts) >= 4 and all(h["Content-Range"].endswith(f"/{SIZE}") for h in puts[1:])
    else:
        assert puts[-1]["Content-Length"] == str(SIZE) and "Content-Range" not in puts[-1]


def test_put_continue_sends_only_the_missing_ranges(server, tmp_path):
    src = os.path.join(server.root, "big.bin")
    with open(src, "rb") as f, open(os.path.join(server.root, "up.bin.part"), "wb") as part:
        part.write(f.read(2_000_000))
    server.parts["/up.bin"] = [(0, 2_000_000)]
    assert run("put", src, server.url("/up.bin"), "--continue") == 0
    assert sha256(os.path.join(server.root, "up.bin")) == sha256(src)
    heads = [h for m, _, h in server.seen if m == "HEAD"]
    assert heads[0].get("DRS-Part") == "ranges"
    puts = [h["Content-Range"] for m, _, h in server.seen if m == "PUT"]
    assert puts == [f"bytes 2000000-{SIZE - 1}/{SIZE}"]


def test_put_continue_of_a_complete_file_sends_nothing(server, tmp_path):
    src = os.path.join(server.root, "big.bin")
    assert run("put", src, server.url("/big.bin"), "--continue") == 0
    assert [m for m, _, _ in server.seen] == ["HEAD"]


def _storing_each_body(server, answer_202_before_the_end):
    """``server``'s PUT as a server that ignores Content-Range: each body is
    stored as the whole file (RFC 9110 sec. 14.5 warns of such servers);
    ``answer_202_before_the_end``: pieces not ending the file are answered
    202 (and dropped), as if taken."""
    from aiohttp import web

    async def put(request, headers):
        span = request.headers.get("Content-Range", "")
        if answer_202_before_the_end and span and not span.endswith(f"-{SIZE - 1}/{SIZE}"):
            async for _ in request.content.iter_any():
                pass
            return web.Response(status=202, headers=headers)
        path = server._file(request)
        existed = os.path.exists(path)
        with open(path, "wb") as f:
            async for chunk in request.content.iter_any():
                f.write(chunk)
        return web.Response(status=204 if existed else 201, headers=headers)

    server._put = put


def test_put_P_to_a_server_ignoring_content_range_sends_the_file_whole(server, tmp_path, caplog):
    """A done status to a piece before the last: the server stored that
    piece as the file; the file goes again in one PUT, and HEAD checks it."""
    _storing_each_body(server, answer_202_before_the_end=False)
    src = os.path.join(server.root, "big.bin")
    assert run("put", src, server.url("/up.bin"), "-P", "4") == 0
    assert sha256(os.path.join(server.root, "up.bin")) == sha256(src)
    puts = [h for m, _, h in server.seen if m == "PUT"]
    assert "Content-Range" in puts[0] and "Content-Range" not in puts[-1] and puts[-1]["Content-Length"] == str(SIZE)
    assert [m for m, _, _ in server.seen][-1] == "HEAD"
    assert "ignores Content-Range" in caplog.text


def test_put_P_fails_when_the_server_holds_another_size(server, tmp_path, capsys):
    """Every piece but the last answered 202, the last stored as the file:
    the HEAD after the PUTs finds the size wrong, exit 1."""
    _storing_each_body(server, answer_202_before_the_end=True)
    src = os.path.join(server.root, "big.bin")
    assert run("put", src, server.url("/up.bin"), "-P", "4") == 1
    err = capsys.readouterr().err
    assert f"of {SIZE} after the partial PUTs" in err and "Traceback" not in err
    assert os.path.getsize(os.path.join(server.root, "up.bin")) < SIZE


def test_ls_lists_a_collection(server, tmp_path, capsys):
    os.mkdir(os.path.join(server.root, "dir one"))
    assert run("ls", server.url("/")) == 0
    assert capsys.readouterr().out.splitlines() == ["big.bin", "dir one/"]
    assert run("ls", "-l", server.url("/")) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split()[:2] == ["file", str(SIZE)] and lines[0].endswith(" big.bin")
    assert lines[1].startswith("dir ") and lines[1].endswith(" dir one")
    assert [h["Depth"] for m, _, h in server.seen if m == "PROPFIND"] == ["1", "1"]


@pytest.mark.parametrize(("path", "password", "words", "status"), [
    ("/nope.bin", PASSWORD, "no such file", 404),
    ("/big.bin", "wrong-pw", "login refused", 401),
    ("/forbidden.bin", PASSWORD, "permission denied", 403),
])
def test_statuses_are_one_sentence_without_the_password(server, tmp_path, capsys, path, password, words, status):
    for argv in (("get", server.url(path, password=password), str(tmp_path / "o")),
                 ("ls", server.url(path, password=password))):
        assert run(*argv) == 1
        err = capsys.readouterr().err
        assert f"{words}" in err and f"(HTTP {status})" in err and f"127.0.0.1:{server.port}{path}" in err
        assert err.count("\n") == 1 and password not in err and "Traceback" not in err


def test_a_file_that_shrank_is_a_416_sentence(server, tmp_path, capsys):
    server.head_extra = 3_000_000  # the HEAD's size is larger than the file: the last range lies past it
    assert run("get", server.url("/big.bin"), str(tmp_path / "o"), "-P", "4") == 1
    err = capsys.readouterr().err
    # (the four ranges go at once: the last one's 416, or a 206 of the smaller size, is told first)
    assert ("lies outside the file" in err and "(HTTP 416)" in err) or "did the file change?" in err
    assert err.count("\n") == 1


def test_connection_refused_on_a_closed_port(tmp_path, capsys):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    assert run("get", f"http://{USER}:{PASSWORD}@127.0.0.1:{port}/f", str(tmp_path / "o")) == 1
    err = capsys.readouterr().err
    assert err == f"drsftp: error: cannot connect to 127.0.0.1:{port}: connection refused\n"


def test_credentials_from_netrc(server, tmp_path):
    netrc = tmp_path / "netrc"
    netrc.write_text(f"machine 127.0.0.1 login {USER} password {PASSWORD}\n")
    netrc.chmod(0o600)
    out = tmp_path / "o"
    assert run("get", server.url("/big.bin", user=None), str(out), "--netrc", str(netrc)) == 0
    assert sha256(out) == sha256(os.path.join(server.root, "big.bin"))


def test_bad_usage_is_exit_2(server, tmp_path, capsys):
    assert run("get", server.url("/"), str(tmp_path / "o")) == 2
    assert "names a directory" in capsys.readouterr().err
    assert run("get", server.url("/big.bin") + "?x=1", str(tmp_path / "o")) == 2
    assert run("get", "-r", "--delete", server.url("/"), str(tmp_path / "o")) == 2


def test_https_checks_the_certificate(tmp_path, capsys, caplog):
    certs = make_certs(tmp_path / "certs")
    root = tmp_path / "root"
    root.mkdir()
    (root / "f.bin").write_bytes(os.urandom(300_000))
    s = FakeServer(str(root), cert=str(certs.good)).start()
    try:
        out = tmp_path / "o"
        assert run("get", s.url("/f.bin"), str(out), "-P", "2", "--ca-file", str(certs.ca)) == 0
        assert sha256(out) == sha256(root / "f.bin")
        assert run("put", str(out), s.url("/g.bin"), "--ca-file", str(certs.ca)) == 0
        assert sha256(root / "g.bin") == sha256(out)
        assert run("get", s.url("/f.bin"), str(tmp_path / "o2"), "--ca-file", str(certs.other_ca)) == 1
        err = capsys.readouterr().err
        assert "TLS certificate of 127.0.0.1 not trusted" in err and err.count("\n") == 1
        assert run("get", s.url("/f.bin"), str(tmp_path / "o3"), "--insecure") == 0
        assert "--insecure: the server's TLS certificate is not checked" in caplog.text
    finally:
        s.stop()


def test_a_malformed_drs_answer_is_ignored(server, tmp_path):
    server.drs_value = "rtt=abc =5 " + "x" * 300
    out, report = tmp_path / "o", tmp_path / "r.json"
    assert run("get", server.url("/big.bin"), str(out), "-P", "2", "--json", str(report)) == 0
    assert sha256(out) == sha256(os.path.join(server.root, "big.bin"))
    assert json.loads(report.read_text())["drs_peer"] is False


def test_a_503_is_retried_with_retries_and_an_error_without(server, tmp_path, capsys):
    server.fail_next = [503]
    assert run("get", server.url("/big.bin"), str(tmp_path / "o")) == 1
    err = capsys.readouterr().err
    assert err.startswith("drsftp: error: HEAD ") and "unavailable (HTTP 503)" in err and err.count("\n") == 1
    server.fail_next = [503]
    out = tmp_path / "o2"
    assert run("get", server.url("/big.bin"), str(out), "--retries", "1") == 0
    assert "retry 1/1" in capsys.readouterr().err
    assert sha256(out) == sha256(os.path.join(server.root, "big.bin"))


def test_auto_ends_a_connection_that_takes_no_new_range(server):
    """-P auto's remove_stream: the newest connection stops at its position
    and its share goes back to the plan (fetch.Download)."""
    import asyncio

    from drsftp.client.http.fetch import Download
    from drsftp.client.http.pool import Pool
    from drsftp.client.streams.rangeplan import RangePlan
    from drsftp.client.transfer.options import TransferOptions
    from drsftp.http.url import parse_http_url
    from drsftp.tuning import Role

    class Held(Download):  # (no request leaves before the three connections took their ranges)
        async def _ask(self, wid, slot):
            headers = await super()._ask(wid, slot)
            if len(self.plan.active) == 3:
                self.taken.set()
            await self.taken.wait()
            return headers

    async def go(fd):
        loc = parse_http_url(server.url("/big.bin"))
        async with Pool(loc, TransferOptions(), Role.RECEIVER, 4) as pool:
            d = Held(pool, "/big.bin", 3)
            d.taken = asyncio.Event()
            d.begin(fd, RangePlan(SIZE, min_steal=1 << 16))
            run = asyncio.ensure_future(d.run())
            await asyncio.wait_for(d.taken.wait(), 10)
            assert d.remove_stream() and d.remove_stream() and not d.remove_stream()  # (one stays)
            await run
            return d

    out = os.path.join(server.root, "copy.bin")
    fd = os.open(out, os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        d = asyncio.run(go(fd))
    finally:
        os.close(fd)
    assert d.plan.missing == 0 and sha256(out) == sha256(os.path.join(server.root, "big.bin"))
    assert d._retired == {1, 2}


def test_connections_opened_early_wait_for_the_file_then_ask_their_ranges(server):
    """fetch.Download.open_early: connections open before the HEAD's answer
    (get.py) and send nothing until ``begin`` gives the file; then each asks
    its share on the connection it opened (Slot.ready); ``abandon`` ends
    them without a request."""
    import asyncio

    from drsftp.client.http.fetch import Download
    from drsftp.client.http.pool import Pool
    from drsftp.client.streams.rangeplan import RangePlan
    from drsftp.client.transfer.options import TransferOptions
    from drsftp.http.url import parse_http_url
    from drsftp.tuning import Role

    async def connected(pool, n):
        for _ in range(500):  # (at most 5 s)
            if len(pool.links) >= n:
                return
            await asyncio.sleep(0.01)
        raise AssertionError(f"{len(pool.links)} of {n} connections")

    async def go(fd):
        loc = parse_http_url(server.url("/big.bin"))
        async with Pool(loc, TransferOptions(), Role.RECEIVER, 4) as pool:
            idle = Download(pool, "/big.bin", 3)
            idle.open_early(2)
            await connected(pool, 2)
            await idle.abandon()
            assert not idle.tasks and not server.seen  # (no request went)
        async with Pool(loc, TransferOptions(), Role.RECEIVER, 4) as pool:
            d = Download(pool, "/big.bin", 3)
            d.open_early(2)
            await connected(pool, 2)
            await asyncio.sleep(0.1)
            assert not server.seen and d.requests == 0  # (they wait for the file)
            d.begin(fd, RangePlan(SIZE))
            await d.run()
            return d, len(pool.links)

    out = os.path.join(server.root, "copy.bin")
    fd = os.open(out, os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        d, links = asyncio.run(go(fd))
    finally:
        os.close(fd)
    assert d.plan.missing == 0 and sha256(out) == sha256(os.path.join(server.root, "big.bin"))
    gets = [h["Range"] for m, _, h in server.seen if m == "GET"]
    assert len(gets) == d.requests == 3 and len(server.peers) == links == 3  # (a share each, one connection each)


def test_a_206_of_another_span_is_refused_before_a_byte_is_written(server, tmp_path, capsys):
    server.shift_range = 10
    out = tmp_path / "o"
    assert run("get", server.url("/big.bin"), str(out)) == 1
    err = capsys.readouterr().err
    assert "to a request for 0-" in err and "did the file change?" in err and err.count("\n") == 1
    assert os.path.getsize(f"{out}.part") == 0


def test_ctrl_c_keeps_the_part_and_continue_completes_it(server, tmp_path):
    """A get interrupted while its data stalls exits 130 in one line, its
    part and resume record kept; --continue fetches only the rest."""
    server.stall_after = 2_000_000
    out = tmp_path / "o"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([os.path.dirname(os.path.dirname(__file__)),
                                                        os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.Popen([sys.executable, "-m", "drsftp", "get", "-q", server.url("/big.bin"), str(out)],
                            stderr=subprocess.PIPE, text=True, env=env)
    try:
        for _ in range(300):  # (at most 30 s for the first 2 MB to land)
            if os.path.exists(f"{out}.part") and os.path.getsize(f"{out}.part") >= 2_000_000:
                break
            time.sleep(0.1)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130 and err == "drsftp: interrupted\n"
    assert os.path.exists(f"{out}.part.ranges") and not out.exists()
    server.stall_after = None
    server.seen.clear()
    report = tmp_path / "r.json"
    assert run("get", server.url("/big.bin"), str(out), "--continue", "--json", str(report)) == 0
    assert sha256(out) == sha256(os.path.join(server.root, "big.bin"))
    assert json.loads(report.read_text())["resumed_from"] == 2_000_000


def test_a_slow_request_is_cut_and_its_tail_fetched_on_kept_connections(server, tmp_path, monkeypatch):
    """Each connection asks for its share in one request; the ones done
    first split the slow first request in flight (fetch.py): its response is
    cut short (its connection closed), the thieves ask on their kept-alive
    connections, and none opens a new one for a tail this small."""
    from drsftp.http import spans

    monkeypatch.setattr(spans, "STEAL_KEPT", 512 << 10)  # (steals on a 20 MB file)
    size = 20_000_000
    with open(os.path.join(server.root, "big20.bin"), "wb") as f:
        f.write(os.urandom(size))
    server.slow_from = 0
    out, report = tmp_path / "o20", tmp_path / "r.json"
    assert run("get", server.url("/big20.bin"), str(out), "-P", "4", "--json", str(report)) == 0
    assert sha256(out) == sha256(os.path.join(server.root, "big20.bin"))
    gets = [h["Range"] for m, _, h in server.seen if m == "GET"]
    starts = sorted(int(g[6:].split("-")[0]) for g in gets)
    first = [g for g in gets if g.startswith("bytes=0-")]  # (the share 0-5 MB, asked in one request)
    assert len(first) == 1 and int(first[0].split("-")[1]) + 1 >= size // 4 - (1 << 16)
    assert any(0 < s < size // 4 for s in starts)  # (and split while in flight)
    assert server.gets_whole < len(gets) and len(server.peers) <= 4 < len(gets)
    assert json.loads(report.read_text())["connections"] == len(server.peers)


def test_only_a_connection_kept_alive_cuts_a_request_in_flight():
    """fetch.Download._ask: a connection just opened takes no part of a
    request in flight (its reader would lose a warm connection for one in
    slow start); one that carried a request before splits it."""
    import asyncio
    import types

    import pytest as _pytest

    from drsftp.client.http.fetch import Download, NoRange
    from drsftp.client.http.pool import Link, Pool, Slot
    from drsftp.client.streams.rangeplan import RangePlan
    from drsftp.client.transfer.options import TransferOptions
    from drsftp.http.url import parse_http_url
    from drsftp.tuning import Role

    async def go():
        pool = Pool(parse_http_url("http://127.0.0.1:9/big.bin"), TransferOptions(), Role.RECEIVER, 4)
        d = Download(pool, "/big.bin", 2)
        d.begin(-1, RangePlan(48 << 20))
        d._begun.set()
        d._go.set()
        await d._ask(0, Slot())  # worker 0 asks for the whole file in one request
        d.plan.advance(0, 1 << 20)
        with _pytest.raises(NoRange):
            await d._ask(1, Slot())  # (a new connection)
        warm = Slot()
        warm.link = Link.__new__(Link)
        warm.link.tuner = types.SimpleNamespace(expect=expected.append)  # (the window opens for the range)
        d._used.add(id(warm.link))
        return d, await d._ask(1, warm)

    expected: list[int] = []
    d, headers = asyncio.run(go())
    a, b = d.plan.active[0], d.plan.active[1]
    assert a.fence == 48 << 20 > a.end == b.start > 1 << 20 and b.end == 48 << 20
    assert headers["Range"] == f"bytes={b.start}-{(48 << 20) - 1}"
    assert expected == [(48 << 20) - b.start]


def test_connections_after_the_first_open_start_on_a_long_path(monkeypatch):
    """pool.Pool.new_socket: once the first connection's TCP handshake gave
    a path RTT of 40 ms or more, the next sockets offer the receiver's cap
    before connecting (docs/DESIGN.md#open-start: the first connection's
    RTT plays the control connection's part); on a short path, or before
    that RTT is known, they start closed."""
    import asyncio
    import socket

    from drsftp.client.http.pool import Pool
    from drsftp.client.transfer.options import TransferOptions
    from drsftp.http.url import parse_http_url
    from drsftp.io import sockopt
    from drsftp.tuning import Role

    info = sockopt.tcp_info
    addr = (socket.AF_INET, socket.SOCK_STREAM, 0, "", ("127.0.0.1", 9))

    def offered(rtt_us):
        async def go():
            pool = Pool(parse_http_url("http://127.0.0.1:9/f"), TransferOptions(), Role.RECEIVER, 4)
            first = pool.new_socket(addr)
            monkeypatch.setattr(sockopt, "tcp_info", lambda s: {**info(s), "rtt": rtt_us} if s is first else info(s))
            second = pool.new_socket(addr)
            try:
                return (first.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF),
                        second.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF))
            finally:
                await pool.__aexit__(None, None, None)
                first.close()
                second.close()
        return asyncio.run(go())

    closed, opened = offered(100_000)
    assert opened >= 4 * closed and opened >= 1 << 20, (closed, opened)
    closed, short = offered(1_000)
    assert short == closed


def test_the_path_rtt_is_the_first_connections_least(monkeypatch):
    """pool.Pool.path_rtt: the first connection's least RTT (its smoothed
    one counts the queue a running transfer fills); none before a sample."""
    import asyncio
    import socket

    from drsftp.client.http.pool import Pool
    from drsftp.client.transfer.options import TransferOptions
    from drsftp.http.url import parse_http_url
    from drsftp.io import sockopt
    from drsftp.tuning import Role

    seen = {}
    monkeypatch.setattr(sockopt, "tcp_info", lambda s: dict(seen))

    async def go():
        pool = Pool(parse_http_url("http://127.0.0.1:9/f"), TransferOptions(), Role.RECEIVER, 4)
        first = pool.new_socket((socket.AF_INET, socket.SOCK_STREAM, 0, "", ("127.0.0.1", 9)))
        try:
            out = [pool.path_rtt()]
            seen.update(rtt=150_000, min_rtt=100_000)
            out.append(pool.path_rtt())
            seen.update(min_rtt=0xFFFFFFFF)  # (the kernel's "none yet")
            out.append(pool.path_rtt())
            return out
        finally:
            await pool.__aexit__(None, None, None)
            first.close()

    assert asyncio.run(go()) == [None, 100_000, 150_000]


class _Coding(http.server.BaseHTTPRequestHandler):
    """A server that gzips its answers: always, or when the request allows it."""

    protocol_version = "HTTP/1.1"
    always = False
    data = b"".join(b"line %08d of a text that compresses well\n" % i for i in range(20000))

    def log_message(self, *args):
        pass

    def do_HEAD(self):
        self.do_GET(head=True)

    def do_GET(self, head=False):
        body, coded = self.data, self.always or "gzip" in (self.headers.get("Accept-Encoding") or "")
        self.send_response(200)
        if coded:
            body = gzip.compress(body)
            self.send_header("Content-Encoding", "gzip")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if not head:
            self.wfile.write(body)


@pytest.mark.parametrize("always", [False, True])
def test_a_content_coded_answer_is_never_stored_as_the_file(tmp_path, always):
    dest = tmp_path / "t.txt"
    with threaded(type("Handler", (_Coding,), {"always": always})) as port:
        r = drsftp("get", "-q", f"http://127.0.0.1:{port}/t.txt", str(dest), timeout=60)
    if always:  # (asked for identity, sent gzip all the same: refused, nothing in place)
        assert r.returncode != 0 and "Content-Encoding gzip" in r.stderr and "Traceback" not in r.stderr
        assert not dest.exists()
    else:  # (asked for identity: the file's own bytes)
        assert r.returncode == 0, r.stderr
        assert dest.read_bytes() == _Coding.data


class _Longer(http.server.BaseHTTPRequestHandler):
    """HTTP/1.0: HEAD says 1000 bytes, GET sends 5000 with no length (the
    file grew between the two), ending the body by closing."""

    protocol_version = "HTTP/1.0"
    ranges = ""

    def log_message(self, *args):
        pass

    def do_HEAD(self):
        self.send_response(200)
        self.send_header("Content-Length", "1000")
        if self.ranges:
            self.send_header("Accept-Ranges", self.ranges)
        self.end_headers()

    def do_GET(self):
        self.send_response(200)
        self.end_headers()
        self.wfile.write(b"x" * 5000)


@pytest.mark.parametrize("ranges", ["", "none"])
def test_a_whole_file_longer_than_its_size_is_refused_not_cut(tmp_path, ranges):
    dest = tmp_path / "f"
    with threaded(type("Handler", (_Longer,), {"ranges": ranges})) as port:  # ("": ranges probed, "none": one GET)
        r = drsftp("get", "-q", f"http://127.0.0.1:{port}/f", str(dest), timeout=60)
    assert r.returncode != 0 and "more than the 1000 bytes" in r.stderr and "Traceback" not in r.stderr, r.stderr
    assert not dest.exists()
