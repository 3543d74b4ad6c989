"""drsftp/server/http: the statuses of GET, HEAD and PUT (docs/HTTP.md's
table), Basic auth, the DRS headers, and `drsftp serve --http-port`'s
start, log lines and stop."""

from __future__ import annotations

import asyncio
import base64
import email
import hashlib
import os
import re
import signal
import socket
import subprocess
import threading
import time
import zlib

import aiohttp
import pytest
from conftest import PASSWORD, PY, USER, drsftp, make_file, wait_until
from httpserve import AUTH, fetch, in_process, run, serve_process
from tlscerts import make_certs

from drsftp.http import drsheader
from drsftp.server.ops.budgetlock import LockedBudget
from drsftp.tuning.base import Decision


@pytest.fixture
def root(tmp_path):
    d = tmp_path / "srv"
    d.mkdir()
    return d


@pytest.fixture
def front(root):
    with in_process(root) as f:
        yield f


def test_get_head_and_404(front, root):
    make_file(root / "f.bin", 3 << 20, seed=1)
    st, h, body = run(fetch(front, "GET", "/f.bin"))
    assert st == 200 and body == (root / "f.bin").read_bytes()
    assert h["Accept-Ranges"] == "bytes" and h["ETag"]
    st, h, body = run(fetch(front, "HEAD", "/f.bin"))
    assert st == 200 and body == b"" and int(h["Content-Length"]) == 3 << 20
    st, _, body = run(fetch(front, "GET", "/nope"))
    assert st == 404 and body.strip().endswith(b".")


def test_logins(front, root):
    (root / "a").write_bytes(b"x")
    st, h, _ = run(fetch(front, "GET", "/a", auth=False))
    assert st == 401 and h["WWW-Authenticate"] == 'Basic realm="drsftp"'
    wrong = {"Authorization": "Basic " + base64.b64encode(f"{USER}:nope-nope".encode()).decode()}
    assert run(fetch(front, "GET", "/a", auth=False, headers=wrong))[0] == 401
    assert run(fetch(front, "GET", "/a", auth=False, headers={"Authorization": "Bearer x"}))[0] == 401
    assert run(fetch(front, "GET", "/a", auth=False, headers={"Authorization": "Basic !!!"}))[0] == 401
    assert run(fetch(front, "GET", "/a"))[0] == 200


def test_passwords_are_checked_in_their_own_threads(front, root):
    """scrypt runs in auth.LOGINS, so wrong passwords queue there, never in
    front of the file I/O of the loop's default executor."""
    (root / "f").write_bytes(b"x")
    authorizer = front.server.handler.authorizer
    check, threads = authorizer.validate_authentication, []

    def recorded(*args):
        threads.append(threading.current_thread().name)
        return check(*args)

    authorizer.validate_authentication = recorded
    wrong = {"Authorization": "Basic " + base64.b64encode(f"{USER}:wrong".encode()).decode()}
    assert run(fetch(front, "GET", "/f", wrong))[0] == 401
    assert run(fetch(front, "GET", "/f"))[0] == 200
    assert len(threads) == 2 and all(t.startswith("drsftp-login") for t in threads), threads


def test_anonymous_read_and_read_only(root):
    (root / "a").write_bytes(b"x")
    with in_process(root, anonymous_read=True, write_perm=False) as front:
        assert run(fetch(front, "GET", "/a", auth=False))[0] == 200
        assert run(fetch(front, "PUT", "/b", auth=False, data=b"y"))[0] == 401  # anonymous: log in to write
        st, _, body = run(fetch(front, "PUT", "/b", data=b"y"))
        assert st == 403 and b"may not PUT" in body  # the user has read rights only
    assert not (root / "b").exists()


def test_ranges(front, root):
    data = os.urandom(100_000)
    (root / "r").write_bytes(data)
    st, h, body = run(fetch(front, "GET", "/r", headers={"Range": "bytes=10-19"}))
    assert st == 206 and body == data[10:20] and h["Content-Range"] == "bytes 10-19/100000"
    st, h, body = run(fetch(front, "GET", "/r", headers={"Range": "bytes=-5"}))
    assert st == 206 and body == data[-5:]
    st, h, body = run(fetch(front, "GET", "/r", headers={"Range": "bytes=0-9,50000-50009,99990-"}))
    assert st == 206 and h["Content-Type"].startswith("multipart/byteranges; boundary=")
    msg = email.message_from_bytes(b"Content-Type: " + h["Content-Type"].encode() + b"\r\n\r\n" + body)
    parts = [(p["Content-Range"], p.get_payload(decode=True)) for p in msg.get_payload()]
    assert parts == [("bytes 0-9/100000", data[:10]), ("bytes 50000-50009/100000", data[50000:50010]),
                     ("bytes 99990-99999/100000", data[99990:])]
    assert int(h["Content-Length"]) == len(body)
    st, h, _ = run(fetch(front, "GET", "/r", headers={"Range": "bytes=100000-"}))
    assert st == 416 and h["Content-Range"] == "bytes */100000"
    st, _, body = run(fetch(front, "GET", "/r", headers={"Range": "bytes=0-9", "If-Range": '"other"'}))
    assert st == 200 and body == data  # the validator does not match: the whole file


def test_want_digest_per_file_version(front, root):
    p = root / "d"
    p.write_bytes(b"hello world")
    _, h, _ = run(fetch(front, "GET", "/d", headers={"Want-Digest": "adler32;q=0.3, sha-256"}))
    assert h["Digest"] == "sha-256=" + base64.b64encode(hashlib.sha256(b"hello world").digest()).decode()
    _, h, _ = run(fetch(front, "HEAD", "/d", headers={"Want-Digest": "adler32"}))
    assert h["Digest"] == f"adler32={zlib.adler32(b'hello world'):08x}"
    p.write_bytes(b"hello there, world")  # another size: another version
    _, h, _ = run(fetch(front, "HEAD", "/d", headers={"Want-Digest": "adler32"}))
    assert h["Digest"] == f"adler32={zlib.adler32(b'hello there, world'):08x}"
    _, h, _ = run(fetch(front, "HEAD", "/d", headers={"Want-Digest": "crc99"}))
    assert "Digest" not in h


def test_put_whole_and_chunked(front, root):
    data = os.urandom(3 << 20)
    st, _, _ = run(fetch(front, "PUT", "/new", data=data))
    assert st == 201 and (root / "new").read_bytes() == data

    async def chunks():
        for i in range(0, len(data), 100_000):
            yield data[i:i + 100_000][::-1]

    st, _, _ = run(fetch(front, "PUT", "/new", data=chunks()))  # Transfer-Encoding: chunked
    assert st == 204
    assert (root / "new").read_bytes() == b"".join(data[i:i + 100_000][::-1] for i in range(0, len(data), 100_000))
    assert sorted(os.listdir(root)) == ["new"]  # no part file left
    assert run(fetch(front, "PUT", "/no/such/dir/f", data=b"x"))[0] == 409
    (root / "dir").mkdir()
    assert run(fetch(front, "PUT", "/dir", data=b"x"))[0] == 409


def test_preconditions_are_evaluated_before_a_method_acts(front, root):
    """RFC 9110 sec. 13.1.1-13.1.2, 13.2.2: a false If-Match or If-None-Match
    is 412 and changes nothing; a matching If-None-Match on GET/HEAD is 304."""
    (root / "f").write_bytes(b"original")
    (root / "d").mkdir()
    tag = run(fetch(front, "HEAD", "/f"))[1]["ETag"]
    for method, path, headers in (("PUT", "/f", {"If-None-Match": "*"}), ("PUT", "/f", {"If-Match": '"nope"'}),
                                  ("PUT", "/new", {"If-Match": "*"}), ("PUT", "/f", {"If-Match": f"W/{tag}"}),
                                  ("PUT", "/f", {"If-None-Match": f'"x", W/{tag}'}),
                                  ("DELETE", "/f", {"If-Match": '"nope"'}), ("DELETE", "/d", {"If-Match": tag}),
                                  ("MOVE", "/f", {"If-Match": '"nope"', "Destination": "/g"}),
                                  ("GET", "/f", {"If-Match": '"nope"'})):
        st, _, body = run(fetch(front, method, path, headers, b"clobber" if method == "PUT" else None))
        assert st == 412 and body.strip().endswith(b"."), (method, headers)
    assert sorted(os.listdir(root)) == ["d", "f"] and (root / "f").read_bytes() == b"original"
    for method in ("GET", "HEAD"):
        st, h, body = run(fetch(front, method, "/f", {"If-None-Match": f'"x", {tag}'}))
        assert st == 304 and h["ETag"] == tag and body == b""
    assert run(fetch(front, "GET", "/f", {"If-None-Match": '"x"'}))[2] == b"original"
    assert run(fetch(front, "GET", "/nope", {"If-Match": tag}))[0] == 404  # (sec. 13.2.1)
    assert run(fetch(front, "DELETE", "/nope", {"If-Match": tag}))[0] == 404
    assert run(fetch(front, "PUT", "/new", {"If-None-Match": "*"}, b"made"))[0] == 201
    assert run(fetch(front, "PUT", "/f", {"If-Match": f'"x", {tag}'}, b"changed"))[0] == 204
    assert run(fetch(front, "DELETE", "/d", {"If-Match": "*"}))[0] == 204
    assert (root / "new").read_bytes() == b"made" and (root / "f").read_bytes() == b"changed"


def test_partial_puts_assemble_the_file(front, root):
    data = os.urandom(300_000)
    tail = {"Content-Range": "bytes 100000-299999/300000"}
    st, h, _ = run(fetch(front, "PUT", "/p", data=data[100_000:], headers=tail))
    assert st == 202 and not (root / "p").exists()
    _, h, _ = run(fetch(front, "HEAD", "/p", headers={"DRS-Part": "ranges"}))
    assert h["DRS-Part-Ranges"] == "100000-299999"
    bad = {"Content-Range": "bytes 0-10/300000"}
    assert run(fetch(front, "PUT", "/p", data=b"short", headers=bad))[0] == 400  # body and range disagree
    assert run(fetch(front, "PUT", "/p", data=b"x", headers={"Content-Range": "bytes 5-1/300000"}))[0] == 400
    st, _, _ = run(fetch(front, "PUT", "/p", data=data[:100_000], headers={"Content-Range": "bytes 0-99999/300000"}))
    assert st == 201 and (root / "p").read_bytes() == data
    _, h, _ = run(fetch(front, "HEAD", "/p", headers={"DRS-Part": "ranges"}))
    assert h["DRS-Part-Ranges"] == ""  # nothing held: the file is whole


def test_partial_puts_that_end_together_rename_the_file_once_the_last_ends(front, root):
    """The partial PUT whose bytes make the file whole while another still
    writes (its body not ended yet) gets 202: the file is renamed into
    place by the last writer, never while one still writes into it."""
    data = os.urandom(200_000)
    first_written = asyncio.Event()

    async def slow_head():
        yield data[:100_000]
        await first_written.wait()  # the other part arrives and settles first

    async def go():
        async with aiohttp.ClientSession() as s:
            async def put(body, span):
                hdrs = {**AUTH, "Content-Range": span}
                async with s.put(front.url("/t"), data=body, headers=hdrs, ssl=front.tls or False) as r:
                    return r.status
            head = asyncio.create_task(put(slow_head(), "bytes 0-99999/200000"))
            await asyncio.sleep(0.3)  # the head's bytes are written, its body still open
            tail = await put(data[100_000:], "bytes 100000-199999/200000")
            renamed_early = (root / "t").exists()
            first_written.set()
            return tail, await head, renamed_early

    tail, head, renamed_early = run(go())
    assert (tail, head, renamed_early) == (202, 201, False)
    assert (root / "t").read_bytes() == data and not [p for p in os.listdir(root) if p.endswith(".part")]


def test_a_second_whole_writer_is_refused_and_a_cut_put_keeps_its_part(front, root):
    (root / "t").write_bytes(b"old")
    head = (f"PUT /t HTTP/1.1\r\nHost: x\r\nAuthorization: {AUTH['Authorization']}\r\n"
            "Content-Length: 1000000\r\n\r\n").encode()
    sock = front.connect()
    try:
        sock.sendall(head + b"a" * 5000)
        deadline = time.monotonic() + 10
        while not (root / ".t.part").exists() or (root / ".t.part").stat().st_size < 5000:
            assert time.monotonic() < deadline
            time.sleep(0.02)
        st, _, body = run(fetch(front, "PUT", "/t", data=b"other"))
        assert st == 409 and b"nother upload is writing" in body
    finally:
        sock.close()
    deadline = time.monotonic() + 10
    while run(fetch(front, "PUT", "/u", data=b"u"))[0] != 201 or (root / ".t.part").stat().st_size < 5000:
        assert time.monotonic() < deadline
    assert (root / "t").read_bytes() == b"old"  # the target untouched
    assert (root / ".t.part").read_bytes() == b"a" * 5000  # what arrived, kept
    _, h, _ = run(fetch(front, "HEAD", "/t", headers={"DRS-Part": "ranges"}))
    assert h["DRS-Part-Ranges"] == "0-4999"


def test_max_body(root):
    with in_process(root, http_max_body=1000) as front:
        st, _, body = run(fetch(front, "PUT", "/big", data=b"x" * 2000))
        assert st == 413 and b"1000 bytes" in body

        async def chunks():
            for _ in range(4):
                yield b"y" * 600

        assert run(fetch(front, "PUT", "/big", data=chunks()))[0] == 413
        assert run(fetch(front, "PUT", "/small", data=b"z" * 1000))[0] == 201
    assert not (root / "big").exists()


def test_drs_headers(front, root):
    make_file(root / "f", 4 << 20)
    st, h, _ = run(fetch(front, "GET", "/f", headers={"DRS": "rtt_us=2000 rate=125000000"}))
    assert st == 200 and drsheader.parse_report(h["DRS"]), h["DRS"]  # the sender's measurements
    st, h, _ = run(fetch(front, "PUT", "/g", data=b"x" * 100_000, headers={"DRS": ""}))
    assert st == 201 and drsheader.parse_report(h["DRS"]), h["DRS"]  # the receiver's
    _, h, _ = run(fetch(front, "GET", "/f"))
    assert "DRS" not in h  # no report asked, none given
    st, _, body = run(fetch(front, "GET", "/f", headers={"DRS": "rtt_us=-1"}))
    assert st == 400 and b"DRS header" in body


def test_one_connection_turned_from_answering_to_receiving_is_tuned_for_it(front, root):
    """A HEAD makes no tuner (its answer's report is empty); a PUT after a
    GET on one kept-alive connection gets the receive buffer autotuning
    grows, not the ACK-sized one the GET's sender set and locked (before:
    a 6 MB upload took 48 s on loopback)."""
    make_file(root / "f", 6_000_000, seed=3)
    data = (root / "f").read_bytes()

    async def on_one_connection():
        conn = aiohttp.TCPConnector(limit=1)
        async with aiohttp.ClientSession(connector=conn, headers={**AUTH, "DRS": ""}) as s:
            async with s.head(front.url("/f")) as r:
                head = r.headers["DRS"]
            async with s.get(front.url("/f")) as r:
                assert await r.read() == data
            async with s.put(front.url("/g"), data=data) as r:
                return head, r.status, drsheader.parse_report(r.headers["DRS"])

    head, status, report = run(on_one_connection())
    assert head == "" and status == 201 and (root / "g").read_bytes() == data
    assert report["rcvbuf"] > 256 << 10, report  # (locked at 16 KiB x 2: 26,212 read back)


def test_locked_budget_is_the_budget_both_fronts_share(root):
    budget = LockedBudget(1 << 20)
    got = budget.limit("a", Decision(rcv_window=4 << 20))
    assert got.rcv_window is not None and got.rcv_window <= 1 << 20
    assert budget.granted_total() == got.rcv_window
    budget.release("a")
    assert budget.granted_total() == 0
    from drsftp.server.app import ServerConfig, build_server

    server = build_server(ServerConfig(root=str(root), user=USER, password=PASSWORD, port=0))
    try:
        assert isinstance(server.handler.buffer_budget, LockedBudget)
    finally:
        server.close_all()


def test_transfers_feed_the_metrics(root):
    with in_process(root, metrics="127.0.0.1:0") as front:
        run(fetch(front, "PUT", "/m", data=b"x" * 1234))
        run(fetch(front, "GET", "/m"))
        run(fetch(front, "GET", "/m", auth=False, headers={"Authorization": "Basic " + base64.b64encode(
            f"{USER}:wrong-password".encode()).decode()}))
        registry = front.server.handler.metrics.registry
        for direction in ("put", "get"):
            labels = {"direction": direction, "result": "complete"}
            assert registry.get_sample_value("drsftp_transfers_total", labels) == 1
            assert registry.get_sample_value("drsftp_transfer_bytes_total", labels) == 1234
        assert registry.get_sample_value("drsftp_logins_total", {"result": "credentials"}) == 1


def test_serve_needs_a_certificate_or_http_plain(root):
    r = drsftp("serve", "--root", str(root), "--user", USER, "--password", PASSWORD, "--port", "0",
               "--http-port", "0", timeout=60)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert "--http-port needs --tls-cert" in r.stderr and r.stderr.count("\n") == 1
    certs = make_certs(root.parent / "certs")
    r = drsftp("serve", "--root", str(root), "--user", USER, "--password", PASSWORD, "--port", "0", "--http-port",
               "0", "--http-plain", "--require-tls", "--tls-cert", str(certs.good), timeout=60)
    assert r.returncode == 2 and "clear text" in r.stderr and "Traceback" not in r.stderr


def test_serve_https_logs_transfers_and_stops_on_sigterm(root, tmp_path):
    certs = make_certs(tmp_path / "certs")
    log = tmp_path / "transfers.log"
    with serve_process(root, "--log-file", str(log), certs=certs) as front:
        assert front.base.startswith("https://")
        assert run(fetch(front, "PUT", "/s", data=b"s" * 5000))[0] == 201
        st, _, body = run(fetch(front, "GET", "/s"))
        assert st == 200 and body == b"s" * 5000
        front.proc.send_signal(signal.SIGTERM)
        assert front.proc.wait(30) == 0
    text = log.read_text()
    assert "direction=put path=/s bytes=5000" in text and "direction=get path=/s bytes=5000" in text
    assert "tls=yes" in text


def test_sigterm_gives_a_running_upload_the_grace_then_aborts_it(root):
    with serve_process(root, "--grace", "1") as front:
        sock = front.connect()
        sock.sendall((f"PUT /g HTTP/1.1\r\nHost: x\r\nAuthorization: {AUTH['Authorization']}\r\n"
                      "Content-Length: 100000\r\n\r\n").encode() + b"g" * 1000)
        deadline = time.monotonic() + 10
        while not (root / ".g.part").exists():
            assert time.monotonic() < deadline
            time.sleep(0.02)
        front.proc.send_signal(signal.SIGTERM)
        assert front.proc.wait(30) == 0  # the grace (1 s) ran out: aborted, the process ended
        sock.close()
    assert not (root / "g").exists() and (root / ".g.part").exists()



def test_a_reload_of_the_users_applies_to_the_next_request(root):
    from drsftp.server.ops.users import HashedAuthorizer

    (root / "a").write_bytes(b"x")
    with in_process(root) as front:
        assert run(fetch(front, "GET", "/a"))[0] == 200
        front.server.handler.authorizer = HashedAuthorizer()  # as SIGHUP's reload replaces it: no users now
        assert run(fetch(front, "GET", "/a"))[0] == 401


def test_an_ftp_upload_of_the_file_makes_a_put_wait(front, root):
    from drsftp.server.ftp import partfile

    part = str(root / ".busy.part")
    assert partfile.claim(part)  # what an FTP STOR of /busy holds while it runs
    try:
        st, _, body = run(fetch(front, "PUT", "/busy", data=b"x"))
        assert st == 409 and b"try again" in body
    finally:
        partfile.release(part)
    assert run(fetch(front, "PUT", "/busy", data=b"x"))[0] == 201


def test_http_port_in_the_config_file(root, tmp_path):
    conf = tmp_path / "serve.toml"
    conf.write_text(f'root = "{root}"\nport = 0\nuser = "{USER}"\npassword = "{PASSWORD}"\nhttp_port = 0\n'
                    'http_plain = true\nhttp_max_body = "1KiB"\n')
    r = drsftp("serve", "--config", str(conf), "--http-max-body", "nonsense", timeout=60)
    assert r.returncode == 2 and "--http-max-body must be a size" in r.stderr and "Traceback" not in r.stderr
    proc = subprocess.Popen([PY, "-m", "drsftp", "serve", "--config", str(conf)], stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True)
    try:
        lines = [proc.stdout.readline() for _ in range(2)]
        assert lines[0].startswith("drsftp serve: listening on")
        assert re.fullmatch(r"drsftp serve: HTTP \(plain\) on 127\.0\.0\.1:\d+\n", lines[1]), lines
    finally:
        proc.terminate()
        assert proc.wait(30) == 0
        proc.stdout.close()
    conf.write_text(conf.read_text().replace("http_port = 0", "http_port = 70000"))
    r = drsftp("serve", "--config", str(conf), timeout=60)
    assert r.returncode == 2 and "http_port must be 0-65535" in r.stderr


def test_a_response_body_is_tuned_from_the_budget_and_gives_it_back(root):
    make_file(root / "big", 64 << 20)
    with in_process(root) as front:
        budget = front.server.handler.buffer_budget
        sock = front.connect()
        try:
            sock.sendall(f"GET /big HTTP/1.1\r\nHost: x\r\nAuthorization: {AUTH['Authorization']}\r\n\r\n".encode())
            assert sock.recv(4096).startswith(b"HTTP/1.1 200")  # then read no more: the body stalls
            deadline = time.monotonic() + 20
            while budget.granted_total() == 0:  # the sender's controller holds its buffers in the budget
                assert time.monotonic() < deadline
                time.sleep(0.02)
        finally:
            sock.close()
        deadline = time.monotonic() + 30
        while budget.granted_total() != 0:  # the connection closed: its controller gave them back
            assert time.monotonic() < deadline
            time.sleep(0.05)


def test_every_answer_names_the_server_without_versions(front, root):
    (root / "a").write_bytes(b"x" * 1000)
    asks = [("GET", "/a", {}), ("GET", "/a", {"Range": "bytes=0-9"}), ("HEAD", "/a", {}), ("GET", "/nope", {}),
            ("PROPFIND", "/", {"Depth": "1"}), ("OPTIONS", "/", {}), ("PUT", "/b", {}), ("BREW", "/a", {})]
    seen = []
    for method, path, extra in asks:
        st, h, _ = run(fetch(front, method, path, headers=extra, data=b"y" if method == "PUT" else None))
        seen.append(st)
        assert h.getall("Server") == ["drsftp"], (method, path, st)
    st, h, _ = run(fetch(front, "GET", "/a", auth=False))
    assert st == 401 and h.getall("Server") == ["drsftp"]
    assert seen == [200, 206, 200, 404, 207, 200, 201, 400]  # (the last: aiohttp's own parser refuses it)


def test_two_paths_to_one_directory_give_one_writer(root):
    (root / "real").mkdir()
    os.symlink("real", root / "link")  # (inside the home: allowed, and the same part file)
    with in_process(root) as front:
        first = socket.create_connection(("127.0.0.1", front.port))
        try:
            first.sendall((f"PUT /real/f HTTP/1.1\r\nHost: x\r\nAuthorization: {AUTH['Authorization']}\r\n"
                           "Content-Length: 100\r\n\r\n").encode() + b"1" * 50)
            part = root / "real" / ".f.part"
            assert wait_until(lambda: part.exists() and part.stat().st_size == 50, 10)
            second = run(fetch(front, "PUT", "/link/f", data=b"2" * 100))[0]
            first.sendall(b"1" * 50)
            first.settimeout(10)
            answer = first.recv(4096).split(b"\r\n")[0]
        finally:
            first.close()
    assert second == 409 and answer.split()[1] in (b"201", b"204")
    assert (root / "real" / "f").read_bytes() == b"1" * 100


def test_another_login_cannot_join_a_file_being_assembled(front, root):
    from drsftp.server.ops.users import hash_password

    other = "other-pass-1"
    front.server.handler.authorizer.add_user("other", hash_password(other, n=2**10), str(root), perm="elradfmwMT")
    mine = socket.create_connection(("127.0.0.1", front.port))
    try:
        mine.sendall((f"PUT /f HTTP/1.1\r\nHost: x\r\nAuthorization: {AUTH['Authorization']}\r\n"
                      "Content-Range: bytes 0-99/200\r\nContent-Length: 100\r\n\r\n").encode() + b"1" * 50)
        part = root / ".f.part"
        assert wait_until(lambda: part.exists() and part.stat().st_size == 50, 10)
        theirs = {"Authorization": "Basic " + base64.b64encode(f"other:{other}".encode()).decode(),
                  "Content-Range": "bytes 100-199/200"}
        refused = run(fetch(front, "PUT", "/f", headers=theirs, data=b"2" * 100, auth=False))[0]
        mine.sendall(b"1" * 50)
        mine.settimeout(10)
        answer = mine.recv(4096).split(b"\r\n")[0]
    finally:
        mine.close()
    assert refused == 409 and answer.split()[1] == b"202"  # (its half stored, the other's refused)
    assert part.read_bytes()[:100] == b"1" * 100 and not (root / "f").exists()
