"""`get -r` and `put -r` over HTTP/WebDAV (drsftp/client/http/tree.py)
against the test's own server (tests/httpfake.py): every file compared by
SHA-256, --sync moving nothing the second time."""

from __future__ import annotations

import json
import os
import shutil

import pytest
from httpfake import FakeServer, sha256

from drsftp.cli import main


def _tree(root):
    """A small tree: files at three depths and an empty directory."""
    for rel, size in (("a.bin", 300_000), ("sub/b b.bin", 70_000), ("sub/deeper/c.bin", 1), ("sub/zero", 0)):
        path = os.path.join(root, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(os.urandom(size))
    os.makedirs(os.path.join(root, "empty"))


def _files(root):
    out = {}
    for folder, dirs, files in os.walk(root):
        for name in files:
            path = os.path.join(folder, name)
            out[os.path.relpath(path, root)] = sha256(path)
        out.update({os.path.relpath(os.path.join(folder, d), root) + "/": "" for d in dirs})
    return out


@pytest.fixture
def server(tmp_path):
    root = tmp_path / "root"
    (root / "big.bin").parent.mkdir()
    (root / "big.bin").write_bytes(b"x")
    _tree(str(root / "dir"))
    s = FakeServer(str(root)).start()
    yield s
    s.stop()


def run(*argv: str) -> int:
    try:
        return main([argv[0], "-q", *argv[1:]])
    except SystemExit as exc:
        return int(exc.code or 0)


def test_get_r_then_sync_moves_nothing(server, tmp_path):
    dest, report = tmp_path / "dest", tmp_path / "r.json"
    assert run("get", "-r", "-c", "2", server.url("/dir/"), str(dest), "--json", str(report)) == 0
    assert _files(dest) == _files(os.path.join(server.root, "dir"))
    r = json.loads(report.read_text())
    assert (r["files"], r["skipped"], r["drs_peer"]) == (4, 0, True)
    assert all(h.get("Depth") == "1" for m, _, h in server.seen if m == "PROPFIND")
    server.seen.clear()
    assert run("get", "-r", "--sync", server.url("/dir/"), str(dest), "--json", str(report)) == 0
    assert (json.loads(report.read_text())["files"], json.loads(report.read_text())["skipped"]) == (0, 4)
    assert not [m for m, _, _ in server.seen if m == "GET"]


def test_get_r_without_a_slash_makes_the_directory(server, tmp_path):
    assert run("get", "-r", "-P", "2", server.url("/dir"), str(tmp_path)) == 0
    assert _files(tmp_path / "dir") == _files(os.path.join(server.root, "dir"))


def test_a_listing_naming_entries_elsewhere_writes_nothing_outside(server, tmp_path):
    server.evil_hrefs = True
    dest = tmp_path / "in" / "dest"
    assert run("get", "-r", server.url("/dir/"), str(dest)) == 0
    assert _files(dest) == _files(os.path.join(server.root, "dir"))
    assert sorted(os.listdir(tmp_path / "in")) == ["dest"] and not (tmp_path / "x.bin").exists()


def test_put_r_then_sync_moves_nothing(server, tmp_path):
    src = tmp_path / "src"
    _tree(str(src))
    report = tmp_path / "r.json"
    # the destination's missing parents are made (as mkdir -p)
    assert run("put", "-r", "-c", "3", "-P", "2", f"{src}/", server.url("/up/new/"), "--json", str(report)) == 0
    assert _files(os.path.join(server.root, "up", "new")) == _files(src)
    assert json.loads(report.read_text())["files"] == 4
    assert run("put", "-r", str(src), server.url("/up/"), "--json", str(report)) == 0
    assert _files(os.path.join(server.root, "up", "src")) == _files(src)  # no slash: the directory itself
    server.seen.clear()
    assert run("put", "-r", "--sync", str(src), server.url("/up/"), "--json", str(report)) == 0
    assert json.loads(report.read_text())["skipped"] == 4
    assert not [m for m, _, _ in server.seen if m == "PUT"]


def test_tree_usage_errors(server, tmp_path, capsys):
    assert run("get", "--sync", server.url("/dir/"), str(tmp_path)) == 2
    assert run("put", "-r", str(tmp_path / "missing"), server.url("/up/")) == 2
    assert run("get", "-r", "--delete", server.url("/dir/"), str(tmp_path)) == 2
    assert capsys.readouterr().err.count("drsftp: error:") == 3


def test_get_r_asks_no_head_and_keeps_its_connections(server, tmp_path):
    """The listing gave each file's size: one GET a file, no HEAD, on at
    most -c connections and the walk's (kept alive from file to file)."""
    from drsftp.client.http.tree import NEAR

    assert run("get", "-r", "-c", "2", server.url("/dir/"), str(tmp_path / "d")) == 0
    methods = [m for m, _, _ in server.seen]
    assert methods.count("GET") == 4 and "HEAD" not in methods and len(server.peers) <= 3
    server.seen.clear()
    server.peers.clear()
    assert run("get", "-r", server.url("/dir/"), str(tmp_path / "auto")) == 0  # -c auto: a loopback RTT
    assert _files(tmp_path / "auto") == _files(os.path.join(server.root, "dir"))
    assert [m for m, _, _ in server.seen].count("GET") == 4 and len(server.peers) <= NEAR + 1


def test_get_r_of_files_named_as_part_files_keeps_every_one(server, tmp_path):
    """``x`` downloads into ``x.part``, also the name of a listed file (and
    ``x.part.ranges`` its record's): the listed ``x.part`` is written after
    ``x`` is done, and a --continue rerun gets ``x`` from its start, not from
    the other file's copy (docs/DATASETS.md, "Part-file names")."""
    d = os.path.join(server.root, "parts")
    os.makedirs(os.path.join(d, "z.part"))
    for name, size in (("x", 3_000_000), ("x.part", 12), ("x.part.ranges", 7), ("x.part.part", 5),
                       ("y.part", 9), ("z", 2_000_000), ("z.part/in", 4)):
        with open(os.path.join(d, name), "wb") as f:
            f.write(os.urandom(size))
    dest = tmp_path / "dest"
    assert run("get", "-r", "-c", "4", server.url("/parts/"), str(dest)) == 0
    assert _files(dest) == _files(d)
    for gone in (os.path.join(d, "z.part"), dest / "z.part"):  # (else z has no part file: the next test)
        shutil.rmtree(gone)
    for argv in (("--continue",), ("--continue", "-P", "2")):
        assert run("get", "-r", "-c", "4", *argv, server.url("/parts/"), str(dest)) == 0, argv
        assert _files(dest) == _files(d), argv


def test_get_r_fails_a_file_whose_part_file_is_a_directory_here(server, tmp_path, capsys):
    """Once a listed directory ``z.part`` is here, ``z`` has no part file:
    it fails with the reason, the rest is copied."""
    d = os.path.join(server.root, "parts")
    os.makedirs(os.path.join(d, "z.part"))
    for name in ("z", "z.part/in", "w"):
        with open(os.path.join(d, name), "wb") as f:
            f.write(os.urandom(1000))
    os.makedirs(tmp_path / "dest" / "z.part")
    assert run("get", "-r", server.url("/parts/"), str(tmp_path / "dest")) == 1
    assert "its part file's name is the directory z.part's" in capsys.readouterr().err
    assert _files(tmp_path / "dest") == {k: v for k, v in _files(d).items() if k != "z"}


def test_get_r_stops_at_a_symlink_loop_and_says_so(server, tmp_path, capsys):
    """WebDAV names no directory's identity: one that lists as a directory
    above it does, with its time, is that one again (a loop: a failure naming
    it, exit 1); the rest is copied."""
    os.symlink(".", os.path.join(server.root, "dir", "sub", "self"))
    dest = tmp_path / "dest"
    assert run("get", "-r", server.url("/dir/"), str(dest)) == 1
    err = capsys.readouterr().err
    assert "/dir/sub/self: lists as /dir/sub does: a loop" in err and "Traceback" not in err
    assert not (dest / "sub" / "self").exists()
    assert _files(dest / "sub") | {"self/": ""} == _files(os.path.join(server.root, "dir", "sub"))  # (all but the link)


def test_get_r_goes_no_deeper_than_the_ftp_walk(server, tmp_path, capsys, monkeypatch):
    """The FTP walk's depth limit (trees/walk.py MAX_DEPTH), made 3 here."""
    import drsftp.client.http.tree as tree

    monkeypatch.setattr(tree, "MAX_DEPTH", 3)
    deep = os.path.join(server.root, "deep", "1", "2", "3", "4", "5")
    os.makedirs(deep)
    for i, folder in enumerate(("deep/1", "deep/1/2/3", "deep/1/2/3/4")):
        with open(os.path.join(server.root, folder, "f"), "wb") as f:
            f.write(b"x" * i)
        os.utime(os.path.join(server.root, folder), (1000 * i, 1000 * i))  # (no loop to suspect)
    dest = tmp_path / "dest"
    assert run("get", "-r", server.url("/deep/"), str(dest)) == 1
    assert "/deep/1/2/3/4: deeper than 3 levels" in capsys.readouterr().err
    assert (dest / "1" / "2" / "3" / "f").exists() and not (dest / "1" / "2" / "3" / "4").exists()


def test_a_refused_listing_fails_that_directory_with_the_servers_sentence(server, tmp_path, capsys):
    """drsftp serve answers a collection longer than its cap with 507 and a
    sentence: that directory fails with it (exit 1), the others are copied;
    `ls` of it says the same."""
    from aiohttp import web

    propfind = server._propfind
    said = "The collection holds more than 100000 entries: list a part of it."

    async def refusing(request, headers):
        if request.path.rstrip("/") == "/dir/sub":
            return web.Response(status=507, text=said + "\n", headers=headers)
        return await propfind(request, headers)

    server._propfind = refusing
    dest = tmp_path / "dest"
    assert run("get", "-r", server.url("/dir/"), str(dest)) == 1
    err = capsys.readouterr().err
    assert "/dir/sub" in err and said in err and "(HTTP 507)" in err and "Traceback" not in err
    assert (dest / "a.bin").stat().st_size == 300_000 and not (dest / "sub" / "b b.bin").exists()
    assert main(["ls", server.url("/dir/sub/")]) == 1
    err = capsys.readouterr().err
    assert said in err and err.count("\n") == 1
