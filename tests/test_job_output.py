"""What a tree job prints when run from a script (stderr not a terminal):
its summary line, as a single file prints its result line (-q: nothing);
each failure as one "drsftp: error: ..." sentence, as a single file's."""

import re

import pytest
from conftest import drsftp, make_file, running_server

SUMMARY = re.compile(r"^(get|put): \d+ files, .* in [\d.]+ s = .*; \d+ skipped, \d+ deleted, \d+ failed;"
                     r" up to \d+ sessions$")


@pytest.fixture
def small_tree(tmp_path):
    root = tmp_path / "srv"
    (root / "data").mkdir(parents=True)
    for i in range(3):
        make_file(root / "data" / f"f{i}.bin", 1000 + i, seed=i)
    with running_server(root) as srv:
        yield srv, root


def test_a_scripted_sync_prints_its_summary_line_and_q_silences_it(small_tree, tmp_path):
    srv, _ = small_tree
    out = tmp_path / "out"
    for expect_files in (3, 0):  # the copy, then a --sync that moves nothing
        r = drsftp("get", "-r", "--sync", srv.url("data/"), str(out))
        assert r.returncode == 0, r.stderr
        assert r.stdout == ""
        lines = r.stderr.splitlines()
        assert len(lines) == 1 and SUMMARY.match(lines[0]), r.stderr
        assert lines[0].startswith(f"get: {expect_files} files")
    r = drsftp("put", "-r", str(out), srv.url("back"))
    assert r.returncode == 0 and SUMMARY.match(r.stderr.strip()) and r.stderr.startswith("put: 3 files"), r.stderr
    r = drsftp("get", "-r", "--sync", "-q", srv.url("data/"), str(out))
    assert (r.returncode, r.stdout, r.stderr) == (0, "", "")


@pytest.mark.parametrize("quiet", [False, True], ids=["default", "q"])
def test_a_jobs_failures_are_error_sentences(small_tree, tmp_path, quiet):
    srv, _ = small_tree
    args = ["-q"] if quiet else []
    r = drsftp("get", *args, srv.url("data/f0.bin"), srv.url("data/missing.bin"), srv.url("data/gone.bin"),
               str(tmp_path / "o") + "/")
    assert r.returncode == 1
    lines = r.stderr.splitlines()
    errors = [line for line in lines if not SUMMARY.match(line)]
    assert len(lines) - len(errors) == (0 if quiet else 1)  # the summary line, unless -q
    assert sorted(errors) == [
        "drsftp: error: /data/gone.bin: no such file or directory on the server",
        "drsftp: error: /data/missing.bin: no such file or directory on the server",
        "drsftp: error: 2 of 3 entries failed",
    ], r.stderr
