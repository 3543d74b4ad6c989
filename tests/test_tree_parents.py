"""`copy -r` and `put -r` into a directory whose parents are missing make
them (MKD each level), as `get -r` does locally; where a level cannot be
made the run is one sentence (docs/THIRDPARTY.md, "Trees";
docs/DATASETS.md).  A copy that fails with nothing to resume leaves no
resume record (docs/THIRDPARTY.md, "Faults and resume")."""

from __future__ import annotations

import os
import subprocess

from conftest import PY, make_file, running_server, sha256_file


def _tree(root):
    os.makedirs(root / "d" / "sub")
    for i in range(3):
        make_file(root / "d" / f"f{i}", 1000 + i, seed=60 + i)
    make_file(root / "d" / "sub" / "s", 999, seed=69)


def _run(*args, env):
    return subprocess.run([PY, "-m", "drsftp", *args, "--progress", "never"], capture_output=True, text=True,
                          timeout=60, env=env)


def test_copy_r_and_put_r_make_the_missing_parents_or_fail_in_one_line(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    _tree(a)
    b.mkdir()
    (b / "blocker").write_bytes(b"a file where a directory would go")
    env = dict(os.environ, XDG_STATE_HOME=str(tmp_path / "state"))
    with running_server(a) as sa, running_server(b) as sb:
        for args, target in ((("copy", "-r", sa.url("d/"), sb.url("x/y/z/")), "x/y/z"),
                             (("copy", "-r", sa.url("d"), sb.url("x2/y/z")), "x2/y/z"),
                             (("put", "-r", str(a / "d") + "/", sb.url("p/q/r/")), "p/q/r")):
            r = _run(*args, env=env)
            assert r.returncode == 0, r.stderr
            for rel in ("f0", "f1", "f2", "sub/s"):
                assert sha256_file(b / target / rel) == sha256_file(a / "d" / rel), (args, rel)
        for args in (("copy", "-r", sa.url("d/"), sb.url("blocker/y/z/")),
                     ("put", "-r", str(a / "d") + "/", sb.url("blocker/q/r/"))):
            r = _run(*args, env=env)
            assert r.returncode == 1, r.stderr
            lines = [x for x in r.stderr.splitlines() if x.strip()]
            assert len(lines) == 1 and "Traceback" not in r.stderr, r.stderr
            assert "cannot make the directory /blocker/" in lines[0] and "550" in lines[0], lines[0]
    assert (b / "blocker").is_file()


def test_a_refused_copy_leaves_no_resume_record(tmp_path):
    """A MODE E copy keeps B's ranges for --continue; one the destination
    refuses (5yz) has nothing to resume: no record stays."""
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    make_file(a / "f.bin", 1 << 20, seed=70)
    state = tmp_path / "state"
    env = dict(os.environ, XDG_STATE_HOME=str(state))
    with running_server(a) as sa, running_server(b, "--read-only") as sb:
        r = _run("copy", "-P", "2", sa.url("f.bin"), sb.url("g.bin"), env=env)
        assert r.returncode == 1 and "STOR /g.bin failed on the destination" in r.stderr, r.stderr
    records = state / "drsftp" / "copies"
    assert not records.exists() or os.listdir(records) == []
