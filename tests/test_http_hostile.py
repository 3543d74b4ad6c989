"""The HTTP front against hostile clients (docs/HTTP.md, "Serving";
docs/SECURITY.md): paths that try to leave the home, oversized headers
and bodies, slow headers, smuggling, ranges past the end, a PUT cut short.
In each case nothing is written outside the home and other clients are
still served."""

from __future__ import annotations

import os
import re
import socket
import time

import pytest
from httpserve import AUTH, in_process, raw, status
from tlscerts import make_certs

CRED = f"Authorization: {AUTH['Authorization']}\r\n"


def request(method: str, target: str, extra: str = "", body: bytes = b"") -> bytes:
    given = "content-length" in extra.lower()
    length = f"Content-Length: {len(body)}\r\n" if (body or method == "PUT") and not given else ""
    return f"{method} {target} HTTP/1.1\r\nHost: x\r\n{CRED}{length}{extra}\r\n".encode() + body


@pytest.fixture
def tree(tmp_path):
    """(home, outside): the served root and a directory beside it, with a secret."""
    home, outside = tmp_path / "srv", tmp_path / "outside"
    home.mkdir()
    outside.mkdir()
    (outside / "secret").write_bytes(b"SECRET")
    (home / "ok").write_bytes(b"fine")
    (home / "link").symlink_to(outside)
    return home, outside


def still_serving(front) -> None:
    resp = raw(front, request("GET", "/ok"))
    assert status(resp) == 200 and resp.endswith(b"fine")


def untouched(outside) -> None:
    assert sorted(os.listdir(outside)) == ["secret"] and (outside / "secret").read_bytes() == b"SECRET"


@pytest.mark.parametrize("target,want", [
    ("/../outside/secret", 400), ("/%2e%2e/outside/secret", 400), ("/%2E%2E%2Foutside%2Fsecret", 400),
    ("/ok/..%2f..%2foutside/secret", 400), ("/..%5coutside%5csecret", 400), ("/a\\..\\b", 400),
    ("/%252e%252e/outside/secret", 404), ("/%00", 400), ("/a%0d%0aX-Injected:%201", 400), ("/%ff%fe", 400),
    ("/link/secret", 403), ("/link/", 403), ("http://x/%2e%2e/outside/secret", 400),
])
def test_paths_cannot_leave_the_home(tree, target, want):
    home, outside = tree
    with in_process(home) as front:
        for method in ("GET", "PUT", "MKCOL", "DELETE", "PROPFIND"):
            extra = "Depth: 0\r\n" if method == "PROPFIND" else ""
            resp = raw(front, request(method, target, extra, b"PWNED" if method == "PUT" else b""))
            # (a literal "%2e%2e" name: no such file, or no such parent for PUT and MKCOL)
            assert status(resp) in ({want} if want != 404 else {404, 409}), (method, resp[:200])
            assert b"SECRET" not in resp
        mv = raw(front, request("MOVE", "/ok", f"Destination: {target}\r\n"))
        assert status(mv) in (400, 403, 404, 409)
        still_serving(front)
    untouched(outside)
    assert sorted(os.listdir(home)) == ["link", "ok"]


def test_listing_leaves_out_a_symlink_leading_out(tree):
    home, _ = tree
    with in_process(home) as front:
        resp = raw(front, request("PROPFIND", "/", "Depth: 1\r\n"))
        assert status(resp) == 207 and b"/ok" in resp and b"link" not in resp


def test_oversized_headers(tree):
    home, outside = tree
    with in_process(home) as front:
        resp = raw(front, request("GET", "/ok", "X-Big: " + "a" * 20000 + "\r\n"))
        assert status(resp) in (400, 431)
        resp = raw(front, request("GET", "/ok", "".join(f"X-{i}: v\r\n" for i in range(300))))
        assert status(resp) in (400, 431)
        resp = raw(front, f"GET /{'a' * 20000} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
        assert status(resp) in (400, 414, 431)
        still_serving(front)
    untouched(outside)


def test_bodies_past_the_limit_or_the_disk(tree):
    home, outside = tree
    with in_process(home, http_max_body=1 << 20) as front:
        resp = raw(front, request("PUT", "/big", f"Content-Length: {2 << 20}\r\n"))
        assert status(resp) == 413 and b"limit" in resp
        still_serving(front)
    with in_process(home) as front:
        resp = raw(front, request("PUT", "/huge", f"Content-Length: {10 ** 18}\r\n"))
        assert status(resp) == 507 and b"no room" in resp
        still_serving(front)
    assert sorted(os.listdir(home)) == ["link", "ok"]
    untouched(outside)


def test_slow_headers_are_timed_out_and_hold_only_their_share(tree):
    """Slowloris from 127.0.0.2: its address gets --max-connections-per-ip
    connections at most (503 past them), each closed when its headers take
    longer than the timeout; a client from 127.0.0.1 is served meanwhile."""
    home, _ = tree
    with in_process(home, idle_timeout=1.0, max_cons_per_ip=4) as front:
        slow = []
        try:
            for _ in range(6):
                s = socket.create_connection(("127.0.0.1", front.port), timeout=10, source_address=("127.0.0.2", 0))
                s.sendall(b"GET /ok HTTP/1.1\r\nHost: x\r\n")
                slow.append(s)
            time.sleep(0.3)
            refused = 0
            for s in slow[4:]:
                s.settimeout(5)
                refused += b"503" in s.recv(1000)
            assert refused == 2
            still_serving(front)
            closed = set()
            deadline = time.monotonic() + 10
            while len(closed) < 4 and time.monotonic() < deadline:
                for i, s in enumerate(slow[:4]):
                    if i in closed:
                        continue
                    try:
                        s.sendall(b"X-Slow: 1\r\n")  # one header line at a time, never the end
                        s.settimeout(0.05)
                        if s.recv(1000) == b"":
                            closed.add(i)
                    except TimeoutError:
                        pass
                    except OSError:
                        closed.add(i)
                time.sleep(0.2)
            assert len(closed) == 4
            still_serving(front)
        finally:
            for s in slow:
                s.close()


@pytest.mark.parametrize("head", [
    "Content-Length: 5\r\nTransfer-Encoding: chunked\r\n",
    "Transfer-Encoding: chunked\r\nContent-Length: 5\r\n",
    "Content-Length: 5\r\nContent-Length: 6\r\n",
    "Transfer-Encoding: chunked\r\n",  # with a bad chunk size below
])
def test_request_smuggling_is_refused(tree, head):
    home, outside = tree
    with in_process(home) as front:
        body = b"zz\r\nhello\r\n0\r\n\r\n" if head == "Transfer-Encoding: chunked\r\n" else b"hello"
        data = f"PUT /smuggled HTTP/1.1\r\nHost: x\r\n{CRED}{head}\r\n".encode() + body
        resp = raw(front, data + request("DELETE", "/ok"), timeout=3, until_close=True)
        assert status(resp) == 400
        assert len(re.findall(rb"HTTP/1\.[01] \d{3}", resp)) == 1  # the request behind it was not run
        assert (home / "ok").exists() and not (home / "smuggled").exists()
        still_serving(front)
    untouched(outside)


def test_ranges_past_the_end(tree):
    home, _ = tree
    with in_process(home) as front:
        resp = raw(front, request("GET", "/ok", "Range: bytes=4-10\r\n"))
        assert status(resp) == 416 and b"Content-Range: bytes */4" in resp
        resp = raw(front, request("GET", "/ok", "Range: bytes=999999999999999999-\r\n"))
        assert status(resp) == 416
        resp = raw(front, request("GET", "/ok", "Range: bytes=" + ",".join(f"{i}-{i}" for i in range(500)) + "\r\n"))
        assert status(resp) == 200 and resp.endswith(b"fine")  # an abusive list: the whole file
        still_serving(front)


def test_a_put_cut_short_over_tls_keeps_its_part_and_the_target(tree, tmp_path):
    home, outside = tree
    certs = make_certs(tmp_path / "certs")
    with in_process(home, certs=certs) as front:
        sock = front.connect()
        sock.sendall(request("PUT", "/ok", "Content-Length: 100000\r\n") + b"n" * 3000)
        deadline = time.monotonic() + 10
        while not (home / ".ok.part").exists() or (home / ".ok.part").stat().st_size < 3000:
            assert time.monotonic() < deadline
            time.sleep(0.02)
        sock.close()
        still_serving(front)  # the old file, whole
        assert (home / ".ok.part").read_bytes() == b"n" * 3000
    untouched(outside)
