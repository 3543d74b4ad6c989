"""drsftp/server/http/uploads.py: a PUT's part file (``.NAME.part``): no
PUT writes one by its name (403), and what a whole-file PUT cut short
wrote is continued by the partial PUTs of a resume (``HEAD`` with
``DRS-Part: ranges``, then the rest), by hand and by ``drsftp put
--continue``."""

from __future__ import annotations

import asyncio
import os
import time

import pytest
from conftest import PASSWORD, USER, drsftp, make_file, sha256_file, wait_until
from httpserve import AUTH, fetch, in_process, run, status

from drsftp.server.http import uploads


@pytest.fixture
def root(tmp_path):
    d = tmp_path / "srv"
    d.mkdir()
    return d


@pytest.fixture
def front(root):
    with in_process(root) as f:
        yield f


def begin_put(front, root, name, length, first):
    """A raw whole-file PUT of ``length`` bytes whose ``first`` bytes are
    in the part file: its socket."""
    sock = front.connect()
    sock.sendall(f"PUT /{name} HTTP/1.1\r\nHost: x\r\nAuthorization: {AUTH['Authorization']}\r\n"
                 f"Content-Length: {length}\r\n\r\n".encode() + first)
    part = root / f".{name}.part"
    assert wait_until(lambda: part.exists() and part.stat().st_size >= len(first))
    return sock


def cut_whole_put(front, root, name, length, sent):
    """A whole-file PUT of ``length`` bytes cut after ``sent`` of them (its
    connection closed), once they are in the part file and the PUT ended."""
    data = os.urandom(length)
    begin_put(front, root, name, length, data[:sent]).close()
    held = f"0-{sent - 1}"  # the cut PUT ends: the part file is free again
    assert wait_until(lambda: run(fetch(front, "HEAD", f"/{name}", headers={"DRS-Part": "ranges"}))[1]
                      .get("DRS-Part-Ranges") == held)
    return data


def test_a_put_of_a_part_files_name_is_refused(front, root):
    st, _, body = run(fetch(front, "PUT", "/.x.part", data=b"EVIL"))
    assert st == 403 and b"part file" in body
    (root / "d").mkdir()
    assert run(fetch(front, "PUT", "/d/.y.part", data=b"EVIL"))[0] == 403
    assert sorted(os.listdir(root)) == ["d"] and not os.listdir(root / "d")


def test_partial_puts_continue_a_cut_whole_put(front, root):
    data = cut_whole_put(front, root, "t", 300_000, 5000)
    first = {"Content-Range": "bytes 5000-99999/300000"}
    st, h, _ = run(fetch(front, "PUT", "/t", data=data[5000:100_000], headers=first))
    assert st == 202 and h["DRS-Part-Ranges"] == "0-99999"  # the cut PUT's bytes kept
    rest = {"Content-Range": "bytes 100000-299999/300000"}
    st, _, _ = run(fetch(front, "PUT", "/t", data=data[100_000:], headers=rest))
    assert st == 201 and (root / "t").read_bytes() == data
    assert sorted(os.listdir(root)) == ["t"]


def test_a_partial_put_of_another_size_starts_the_part_file_over(front, root):
    data = cut_whole_put(front, root, "t", 300_000, 5000)  # the cut PUT announced 300000 bytes
    other = {"Content-Range": "bytes 5000-9999/400000"}
    st, h, _ = run(fetch(front, "PUT", "/t", data=data[5000:10_000], headers=other))
    assert st == 202 and h["DRS-Part-Ranges"] == "5000-9999"


def test_put_continue_after_a_cut_put_completes_in_one_run(front, root, tmp_path, monkeypatch):
    """`drsftp put` stopped by --max-time mid-body (the server's writes
    slowed here), then `put --continue`: one run completes the file."""
    src = make_file(tmp_path / "big.bin", 8 << 20, seed=5)
    write = uploads._write

    async def slow(fd, at, data, part):
        await asyncio.sleep(len(data) / 2e6)  # 2 MB/s: the 8 MiB take 4 s
        return await write(fd, at, data, part)

    monkeypatch.setattr(uploads, "_write", slow)
    url = f"http://{USER}:{PASSWORD}@127.0.0.1:{front.port}/big.bin"
    r = drsftp("put", "-P", "1", str(src), url, "--max-time", "1", timeout=120)
    assert r.returncode == 28, r.stderr
    monkeypatch.setattr(uploads, "_write", write)
    part = root / ".big.bin.part"
    assert not (root / "big.bin").exists() and part.exists() and 0 < part.stat().st_size < 8 << 20
    deadline = time.monotonic() + 10  # the cut PUT ends on the server
    while not run(fetch(front, "HEAD", "/big.bin", headers={"DRS-Part": "ranges"}))[1].get("DRS-Part-Ranges"):
        assert time.monotonic() < deadline
        time.sleep(0.05)
    r = drsftp("put", str(src), url, "--continue", timeout=120)
    assert r.returncode == 0, r.stderr
    assert sha256_file(root / "big.bin") == sha256_file(src)
    assert not part.exists()


def test_a_part_file_replaced_under_a_put_is_not_moved(front, root):
    sock = begin_put(front, root, "t", 10_000, b"a" * 5000)
    try:
        (root / "other").write_bytes(b"OTHER")
        os.replace(root / "other", root / ".t.part")  # (as a local process could)
        sock.sendall(b"a" * 5000)
        sock.settimeout(10)
        answer = sock.recv(65536)
    finally:
        sock.close()
    assert status(answer) == 409 and b"removed or replaced" in answer
    assert not (root / "t").exists() and (root / ".t.part").read_bytes() == b"OTHER"
