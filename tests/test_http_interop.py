"""`drsftp serve --http-port` over HTTPS against curl and rclone's webdav
backend: bytes compared both ways (docs/HTTP.md)."""

from __future__ import annotations

import filecmp
import os
import shutil
import subprocess

import pytest
from conftest import PASSWORD, USER, make_file
from httpserve import serve_process
from tlscerts import make_certs


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    base = tmp_path_factory.mktemp("interop")
    root = base / "srv"
    root.mkdir()
    certs = make_certs(base / "certs")
    with serve_process(root, certs=certs) as front:
        yield front, root, base


def curl(front, *args: str, ok: bool = True, stdin: bytes | None = None) -> subprocess.CompletedProcess:
    """curl over the test CA; its stdout is the body, the last line of stderr the status."""
    exe = shutil.which("curl")
    assert exe, "curl is needed for this test"
    r = subprocess.run([exe, "-sS", "--cacert", str(front.ca), "-u", f"{USER}:{PASSWORD}", "-w",
                        "%{stderr}%{http_code}", *args], capture_output=True, timeout=120, input=stdin)
    if ok:
        assert r.returncode == 0, r.stderr
    return r


def code(r: subprocess.CompletedProcess) -> int:
    return int(r.stderr.decode().strip().splitlines()[-1])


def test_curl_put_get_range(served):
    front, root, base = served
    src = make_file(base / "c.bin", (5 << 20) + 123, seed=3)
    r = curl(front, "-T", str(src), front.url("/c.bin"))
    assert code(r) == 201 and filecmp.cmp(src, root / "c.bin", shallow=False)
    r = curl(front, "-o", str(base / "c.back"), front.url("/c.bin"))
    assert code(r) == 200 and filecmp.cmp(src, base / "c.back", shallow=False)
    r = curl(front, "-r", "1000-1999", front.url("/c.bin"))
    assert code(r) == 206 and r.stdout == src.read_bytes()[1000:2000]
    r = curl(front, "-C", "-", "-o", str(base / "c.back"), front.url("/c.bin"))  # nothing left to fetch
    assert code(r) in (200, 206, 416) and filecmp.cmp(src, base / "c.back", shallow=False)
    with open(base / "c.half", "wb") as f:
        f.write(src.read_bytes()[:3 << 20])
    r = curl(front, "-C", "-", "-o", str(base / "c.half"), front.url("/c.bin"))  # resume a download
    assert code(r) == 206 and filecmp.cmp(src, base / "c.half", shallow=False)


def test_curl_dav_methods(served):
    front, root, _ = served
    assert code(curl(front, "-X", "MKCOL", front.url("/dir"))) == 201
    body = os.urandom(300_000)
    assert code(curl(front, "-T", "-", front.url("/dir/a.txt"), stdin=body)) == 201  # (chunked, from stdin)
    assert (root / "dir" / "a.txt").read_bytes() == body
    (root / "dir" / "b.txt").write_bytes(b"bee")
    r = curl(front, "-X", "PROPFIND", "-H", "Depth: 1", front.url("/dir/"))
    assert code(r) == 207 and b"/dir/b.txt" in r.stdout and b"<D:getcontentlength>3<" in r.stdout
    r = curl(front, "-X", "MOVE", "-H", f"Destination: {front.url('/dir/c.txt')}", front.url("/dir/b.txt"))
    assert code(r) == 201 and (root / "dir" / "c.txt").read_bytes() == b"bee"
    assert not (root / "dir" / "b.txt").exists()
    assert code(curl(front, "-X", "DELETE", front.url("/dir/c.txt"))) == 204
    assert not (root / "dir" / "c.txt").exists()
    assert code(curl(front, "-I", "-X", "OPTIONS", front.url("/"))) == 200


def rclone(front, base, *args: str) -> subprocess.CompletedProcess:
    exe = shutil.which("rclone")
    assert exe, "rclone is needed for this test"
    obscured = subprocess.run([exe, "obscure", PASSWORD], capture_output=True, text=True, timeout=60).stdout.strip()
    env = {**os.environ, "RCLONE_CONFIG": str(base / "rclone.conf")}  # (an empty config of the test's own)
    r = subprocess.run([exe, "--webdav-url", front.url("/tree"), "--webdav-user", USER, "--webdav-pass", obscured,
                        "--webdav-vendor", "other", "--ca-cert", str(front.ca), "--retries", "1", *args],
                       capture_output=True, text=True, timeout=300, env=env)
    assert r.returncode == 0, r.stderr
    return r


def test_rclone_copies_both_ways(served):
    front, root, base = served
    src = base / "tree-src"
    (src / "sub" / "deeper").mkdir(parents=True)
    make_file(src / "big.bin", 12 << 20, seed=5)
    make_file(src / "sub" / "mid.bin", 700_000, seed=6)
    (src / "sub" / "deeper" / "small.txt").write_bytes(b"small\n")
    (src / "empty.txt").write_bytes(b"")
    (root / "tree").mkdir()
    rclone(front, base, "copy", str(src), ":webdav:")
    assert not filecmp.dircmp(src, root / "tree").diff_files
    for rel in ("big.bin", "sub/mid.bin", "sub/deeper/small.txt", "empty.txt"):
        assert filecmp.cmp(src / rel, root / "tree" / rel, shallow=False), rel
    back = base / "tree-back"
    rclone(front, base, "copy", ":webdav:", str(back))
    for rel in ("big.bin", "sub/mid.bin", "sub/deeper/small.txt", "empty.txt"):
        assert filecmp.cmp(src / rel, back / rel, shallow=False), rel
    r = rclone(front, base, "lsf", "-R", ":webdav:")
    assert sorted(r.stdout.split()) == ["big.bin", "empty.txt", "sub/", "sub/deeper/", "sub/deeper/small.txt",
                                        "sub/mid.bin"]
    assert not [n for n in os.listdir(root / "tree") if n.endswith(".part")]
