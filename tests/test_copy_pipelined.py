"""`drsftp copy -r` pipelines each pair's files on its cached MODE E
streams (docs/THIRDPARTY.md, "Trees"; decision 0024), between two `drsftp
serve` on 127.0.0.1, each behind a control-connection relay
(tests/ctlproxy.py) that holds every transfer's 226 until the next
transfer command has come: the copy sends the next file's RETR and STOR
before the 226 of the one before, so no hold runs out but each
connection's last.  A file the source refuses, or the destination, fails
alone; the others arrive whole (none takes another's blocks)."""

from __future__ import annotations

import json
import os
import re

import pytest
from conftest import PASSWORD, USER, drsftp, make_file, running_server, sha256_file
from ctlproxy import HoldingProxy

SIZES = [300_000 + 7 * i for i in range(12)]


@pytest.fixture
def trees(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    a, b = tmp_path / "a", tmp_path / "b"
    (a / "tree").mkdir(parents=True)
    b.mkdir()
    for i, size in enumerate(SIZES):
        make_file(a / "tree" / f"m{i:02d}.bin", size, seed=60 + i)
    return a, b


def url(port, path):
    return f"ftp://{USER}:{PASSWORD}@127.0.0.1:{port}/{path}"


def run_copy(tmp_path, a_port, b_port, *extra):
    out = tmp_path / "copy.json"
    r = drsftp("copy", url(a_port, "tree/"), url(b_port, "copy/"), "-r", "--progress", "never", "--json", str(out),
               *extra, timeout=120)
    with open(out) as f:
        return r, json.load(f)


def same(a, b, names):
    return all(sha256_file(a / "tree" / n) == sha256_file(b / "copy" / n) for n in names)


def test_each_pairs_next_file_goes_before_the_226_of_the_one_before(trees, tmp_path):
    a, b = trees
    with running_server(a) as sa, running_server(b, "-vv") as sb:
        pa, pb = HoldingProxy(sa.port), HoldingProxy(sb.port)
        try:
            r, d = run_copy(tmp_path, pa.port, pb.port, "-c", "2", "-P", "2")
        finally:
            pa.close()
            pb.close()
        b_log = sb.stderr_text()
    assert r.returncode == 0, r.stderr
    names = [f"m{i:02d}.bin" for i in range(len(SIZES))]
    assert same(a, b, names)
    # every 226 but each connection's last was released by the next file's command
    retrs = sum(c.startswith("RETR") for c in pa.commands)
    stors = sum(c.startswith("STOR") for c in pb.commands)
    assert retrs == stors == len(SIZES)
    assert pa.timeouts <= 2 and pb.timeouts <= 2, (pa.timeouts, pb.timeouts)
    assert pa.released >= len(SIZES) - 2 and pb.released >= len(SIZES) - 2
    ok = [f for f in d["files"] if f["status"] == "ok"]
    assert len(ok) == len(SIZES) and all(f["mode"] == "E" and f["pipelined"] for f in ok)
    assert sum(f["cached"] for f in ok) >= len(SIZES) - 2  # each pair's first opened the streams
    assert len(re.findall(r"<- PASV", b_log)) <= 2  # a PASV per pair: the streams carried every file


def test_a_file_the_source_refuses_fails_alone(trees, tmp_path):
    """The source answers RETR m05 with 550 (the file went after the walk):
    m05 fails, no STOR is sent for it, the pair's streams carry on."""
    a, b = trees

    def vanish(line):
        if line.startswith("RETR") and line.endswith("m05.bin"):
            os.unlink(a / "tree" / "m05.bin")

    with running_server(a) as sa, running_server(b, "-vv") as sb:
        pa, pb = HoldingProxy(sa.port, hold=0.5, on_command=vanish), HoldingProxy(sb.port, hold=0.5)
        try:
            r, d = run_copy(tmp_path, pa.port, pb.port, "-c", "1")
        finally:
            pa.close()
            pb.close()
        b_log = sb.stderr_text()
    assert r.returncode == 1
    status = {os.path.basename(f["path"]): f for f in d["files"]}
    assert status["m05.bin"]["status"] == "failed" and "RETR" in status["m05.bin"]["error"]
    assert "550" in status["m05.bin"]["error"]
    others = [n for n in status if n != "m05.bin"]
    assert len(others) == len(SIZES) - 1 and all(status[n]["status"] == "ok" for n in others)
    assert same(a, b, others)
    assert not (b / "copy" / "m05.bin").exists()
    assert not any("m05" in c for c in pb.commands if c.startswith("STOR"))
    assert len(re.findall(r"<- PASV", b_log)) == 1  # one pair, its streams never replaced
    assert f"{len(SIZES) - 1} files" in r.stderr and "1 failed" in r.stderr  # the result line's counts


def test_a_file_the_destination_refuses_fails_alone_and_the_pair_opens_new_streams(trees, tmp_path):
    """The destination refuses STOR m07 (a directory took its name after the
    walk) while the source already sends m07's blocks: m07 fails, the pair's
    streams are replaced, and every other file arrives whole (no file takes
    m07's blocks)."""
    a, b = trees

    def squat(line):
        if line.startswith("STOR") and line.endswith("m07.bin"):
            (b / "copy" / "m07.bin").mkdir()

    with running_server(a, "-vv") as sa, running_server(b, "-vv") as sb:
        pa, pb = HoldingProxy(sa.port, hold=0.5), HoldingProxy(sb.port, hold=0.5, on_command=squat)
        try:
            r, d = run_copy(tmp_path, pa.port, pb.port, "-c", "1")
        finally:
            pa.close()
            pb.close()
        a_log, b_log = sa.stderr_text(), sb.stderr_text()
    assert r.returncode == 1
    status = {os.path.basename(f["path"]): f for f in d["files"]}
    assert status["m07.bin"]["status"] == "failed" and "STOR" in status["m07.bin"]["error"]
    others = [n for n in status if n != "m07.bin"]
    assert len(others) == len(SIZES) - 1 and all(status[n]["status"] == "ok" for n in others)
    assert same(a, b, others)
    assert (b / "copy" / "m07.bin").is_dir()
    assert len(re.findall(r"<- PASV", b_log)) == 2  # the streams that carried m07's blocks replaced
    assert "<- ABOR" in a_log  # the source's m07 (and what it held behind it) aborted
    assert f"{len(SIZES) - 1} files" in r.stderr and "1 failed" in r.stderr
