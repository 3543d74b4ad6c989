"""`drsftp bench smallfiles` (drsftp/bench/smallfiles): trees of many small
files on loopback beside GridFTP and lftp, both ends' time and memory."""

import json
import os

import pytest
from conftest import usage_exit

from drsftp.bench.smallfiles import run as sf


@pytest.mark.parametrize("argv,message", [
    (["--counts", "10,x"], "--counts: invalid literal for int() with base 10: 'x'"),
    (["--counts", "0"], "--counts: each count must be 1 to 10,000,000 files"),
    (["--entries", "drsftp-get,scp"], "unknown entry 'scp'; choose from " + ", ".join(sf.DEFAULT_ENTRIES)),
    (["--size", "lots"], "--size: not a size: 'lots' (examples: 65536, 64k, 4MiB)"),
    (["--reps", "0"], "--reps must be at least 1"),
    (["--listing", "0"], "--listing must be 1 to 10,000,000 entries"),
    (["--workdir", "/nonexistent-drs"], "--workdir /nonexistent-drs is not a directory"),
])
def test_bad_options_are_refused_before_anything_is_made(argv, message, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert usage_exit(["bench", "smallfiles", *argv]) == 2
    assert capsys.readouterr().err == f"drsftp: error: {message}\n"
    assert os.listdir(tmp_path) == []


def test_a_tree_is_compared_byte_for_byte(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    total = sf.make_tree(str(a), 25, 100, per_dir=10)
    assert total == sum(p.stat().st_size for p in a.rglob("*") if p.is_file())
    assert len(list(a.rglob("f*"))) == 25 and len(os.listdir(a)) == 3  # 10 + 10 + 5
    import shutil

    shutil.copytree(a, b)
    assert sf.same_tree(str(a), str(b)) is None
    victim = next(p for p in sorted(b.rglob("f*")) if p.stat().st_size)
    victim.write_bytes(b"x" + victim.read_bytes()[1:])
    assert sf.same_tree(str(a), str(b)).endswith("differs")
    victim.unlink()
    assert "1 entries missing" in sf.same_tree(str(a), str(b))


def test_a_small_run_moves_identical_trees_and_reports_both_ends(tmp_path, capsys, monkeypatch):
    """Every entry kind for real on 30 files: drsftp both ways, GridFTP's own
    pair, GridFTP's client and lftp against drsftp serve; the listing too."""
    import shutil
    import tempfile

    from drsftp.cli import main

    monkeypatch.chdir(tmp_path)
    work = tempfile.mkdtemp(prefix="drs-sf-", dir="/dev/shm")  # GridFTP's anonymous user (nobody) reaches it
    os.chmod(work, 0o777)
    try:
        _small_run(main, work, tmp_path, capsys)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _small_run(main, work, tmp_path, capsys):
    code = main(["bench", "smallfiles", "--counts", "30", "--per-dir", "10", "--reps", "1", "--listing", "40",
                 "--workdir", work, "--out", "out", "--max-time", "120"])
    out = capsys.readouterr().out
    data = json.loads((tmp_path / "out" / "smallfiles.json").read_text())
    assert code == 0, [r.get("error") for r in data["runs"]]
    assert {r["entry"] for r in data["runs"]} == set(sf.DEFAULT_ENTRIES)
    assert all(r["ok"] and r["files"] == 30 and r["client_peak_rss"] > 0 and r["server_peak_rss"] > 0
               for r in data["runs"]), data["runs"]
    assert data["listing"]["mlsd"]["lines"] == data["listing"]["nlst"]["lines"] == 40
    assert "| 30 | guc-get-gridftp |" in out and "| 1.00 |" in out
    left = os.listdir(os.path.join(work, "drs-smallfiles"))
    assert not [n for n in left if n.startswith("dest-")]  # destinations removed
    assert (tmp_path / "out" / "smallfiles.png").stat().st_size > 0
    assert main(["benchreport", str(tmp_path / "out" / "smallfiles.json")]) == 0
    assert "| 30 | drsftp-get |" in capsys.readouterr().out
