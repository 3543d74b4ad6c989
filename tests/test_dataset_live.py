"""Dataset jobs against `drsftp serve` on loopback: get -r, put -r, several
sources, ls, --sync/--delete, partial failure, symlinks, a tree changing
while it is copied."""

import asyncio
import json
import os
import shutil
import signal
import subprocess
import sys

import pytest
from conftest import drsftp, make_file, running_server, sha256_file, wait_until
from dataset_util import assert_same_tree, by_status, job_records, make_tree

from drsftp.client.transfer.getput import TransferOptions
from drsftp.client.trees import dataset
from drsftp.client.trees.dataset import JobOptions, run_get
from drsftp.client.trees.job.cli import parse_src_url


@pytest.fixture
def tree_server(tmp_path):
    root = tmp_path / "srv"
    make_tree(root / "data")
    with running_server(root) as srv:
        yield srv, root


def test_get_r_copies_a_tree_with_odd_names_deep_and_empty_entries(tree_server, tmp_path):
    srv, root = tree_server
    out = tmp_path / "out"
    r = drsftp("-v", "get", "-r", "-c", "3", srv.url("data/"), str(out), "--json", str(tmp_path / "j.json"))
    assert r.returncode == 0, r.stderr
    assert_same_tree(root / "data", out)
    assert "Traceback" not in r.stderr
    # the server's times come along (MLSD modify: whole seconds)
    src, dst = root / "data" / "with space.txt", out / "with space.txt"
    assert abs(os.stat(src).st_mtime - os.stat(dst).st_mtime) < 1.0
    rec = job_records(tmp_path / "j.json")
    files = [f for f in rec["files"] if f["status"] == "ok"]
    assert len(files) == 9 + 12 + 2  # every file, one record each
    big = next(f for f in files if f["path"].endswith("big.bin"))
    assert big["bytes"] == 3 << 20 and big["direction"] == "get" and "mbps" in big and "remote" in big
    assert rec["bytes"] == sum(f["bytes"] for f in files)
    assert "23 files" in r.stderr and "0 failed" in r.stderr  # the summary line (-v)
    assert sum(1 for line in r.stderr.splitlines() if line.startswith("ok ")) == 23  # a line per file


def test_get_r_without_slash_makes_dest_slash_name_and_single_session_works(tree_server, tmp_path):
    srv, root = tree_server
    out = tmp_path / "out"
    out.mkdir()
    r = drsftp("get", "-r", "-c", "1", srv.url("data"), str(out))
    assert r.returncode == 0, r.stderr
    assert_same_tree(root / "data", out / "data")


def test_put_r_then_several_sources_in_one_get(tree_server, tmp_path):
    srv, root = tree_server
    src = make_tree(tmp_path / "up src", depth=5, files=3)
    r = drsftp("put", "-r", "-c", "2", str(src) + "/", srv.url("uploaded/"))
    assert r.returncode == 0, r.stderr
    assert_same_tree(src, root / "uploaded")
    # no temporary upload names are left
    assert not [p for p in os.listdir(root / "uploaded") if p.endswith(".part")]
    # several sources, one call: two files and a directory into DEST/
    out = tmp_path / "multi"
    r = drsftp("get", "-r", srv.url("data/plain.txt"), srv.url("data/a..b"), srv.url("uploaded/sub"),
               str(out) + "/")
    assert r.returncode == 0, r.stderr
    assert sorted(os.listdir(out)) == ["a..b", "plain.txt", "sub"]
    assert_same_tree(src / "sub", out / "sub")
    assert (out / "a..b").read_bytes() == (root / "data" / "a..b").read_bytes()
    # a directory without -r is refused, the file beside it still comes
    r = drsftp("get", srv.url("data/sub"), srv.url("data/plain.txt"), str(tmp_path / "norec") + "/")
    assert r.returncode == 1 and "use -r" in r.stderr and "Traceback" not in r.stderr
    assert os.listdir(tmp_path / "norec") == ["plain.txt"]


def test_put_several_local_sources(tree_server, tmp_path):
    srv, root = tree_server
    a, b = make_file(tmp_path / "a.bin", 5000, seed=1), make_file(tmp_path / "b c.bin", 0, seed=2)
    r = drsftp("put", str(a), str(b), srv.url("two/"))
    assert r.returncode == 0, r.stderr
    assert sorted(os.listdir(root / "two")) == ["a.bin", "b c.bin"]
    with open(a, "rb") as f:
        assert (root / "two" / "a.bin").read_bytes() == f.read()


def test_ls_lists_names_and_long_form(tree_server):
    srv, root = tree_server
    r = drsftp("ls", srv.url("data"))
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert "with space.txt" in lines and "sub/" in lines and "empty dir/" in lines and "ünïcødé ñ.bin" in lines
    r = drsftp("ls", "-l", srv.url("data"))
    row = next(line for line in r.stdout.splitlines() if line.endswith(" a..b"))
    assert row.split()[0] == "file" and int(row.split()[1]) == os.path.getsize(root / "data" / "a..b")
    r = drsftp("ls", srv.url("nothing/here"))
    assert r.returncode == 1 and r.stderr.count("\n") == 1 and "no such file" in r.stderr


def test_sync_rerun_moves_only_what_is_missing_and_deletes_only_with_delete(tree_server, tmp_path):
    srv, root = tree_server
    out = tmp_path / "out"
    assert drsftp("get", "-r", srv.url("data/"), str(out)).returncode == 0
    # a crash: one file gone, one cut short (its .part left), one changed on the server
    os.unlink(out / "plain.txt")
    big = out / "sub" / "ünï dir" / "big.bin"
    data = big.read_bytes()
    os.unlink(big)
    (out / "sub" / "ünï dir" / "big.bin.part").write_bytes(data[: 1 << 20])
    make_file(root / "data" / "a..b", 2222, seed=55)
    (out / "extra.txt").write_text("local only")
    j = tmp_path / "sync.json"
    r = drsftp("get", "-r", "--sync", srv.url("data/"), str(out), "--json", str(j))
    assert r.returncode == 0, r.stderr
    st = by_status(job_records(j))
    assert {os.path.basename(p) for p in st["ok"]} == {"plain.txt", "big.bin", "a..b"}
    assert len(st["skipped"]) == 20
    resumed = next(f for f in job_records(j)["files"] if f["path"].endswith("big.bin"))
    assert resumed["resumed_from"] == 1 << 20 and resumed["bytes"] == (3 << 20) - (1 << 20)
    assert (out / "extra.txt").exists()  # never deleted without --delete
    os.unlink(out / "extra.txt")
    assert_same_tree(root / "data", out)
    (out / "extra.txt").write_text("local only")
    os.makedirs(out / "extra dir" / "x")
    r = drsftp("get", "-r", "--sync", "--delete", srv.url("data/"), str(out), "--json", str(j))
    assert r.returncode == 0, r.stderr
    assert len(by_status(job_records(j))["deleted"]) == 3
    assert_same_tree(root / "data", out)


def test_sync_checksum_finds_a_same_size_change(tree_server, tmp_path):
    srv, root = tree_server
    out = tmp_path / "out"
    assert drsftp("get", "-r", srv.url("data/sub/"), str(out)).returncode == 0
    f = out / "f003.bin"
    data = bytearray(f.read_bytes())
    data[100] ^= 0xFF
    f.write_bytes(bytes(data))
    os.utime(f, (2e9, 2e9))  # newer than the server's: size and time say complete
    r = drsftp("get", "-r", "--sync", srv.url("data/sub/"), str(out))
    assert r.returncode == 0 and f.read_bytes() == bytes(data)
    r = drsftp("-v", "get", "-r", "--sync", "--checksum", srv.url("data/sub/"), str(out))
    assert r.returncode == 0, r.stderr
    assert_same_tree(root / "data" / "sub", out)


def test_put_sync_skips_what_the_server_holds(tree_server, tmp_path):
    srv, root = tree_server
    src = make_tree(tmp_path / "src", depth=3, files=4)
    assert drsftp("put", "-r", str(src) + "/", srv.url("up")).returncode == 0
    make_file(src / "plain.txt", 999, seed=3)
    os.utime(src / "plain.txt", (2e9, 2e9))
    j = tmp_path / "p.json"
    r = drsftp("put", "-r", "--sync", "--delete", str(src) + "/", srv.url("up"), "--json", str(j))
    assert r.returncode == 0, r.stderr
    st = by_status(job_records(j))
    assert [os.path.basename(p) for p in st["ok"]] == ["plain.txt"] and "deleted" not in st
    assert_same_tree(src, root / "up")
    os.unlink(src / "a..b")
    shutil.rmtree(src / "empty dir")
    r = drsftp("put", "-r", "--sync", "--delete", str(src) + "/", srv.url("up"), "--json", str(j))
    assert r.returncode == 0, r.stderr
    assert len(by_status(job_records(j))["deleted"]) == 2
    assert_same_tree(src, root / "up")


def test_symlinks_are_never_followed_out_of_the_served_root(tmp_path):
    root = tmp_path / "srv"
    make_tree(root / "data", depth=2, files=2)
    secret_dir = tmp_path / "outside"
    secret_dir.mkdir()
    (secret_dir / "secret.txt").write_text("SECRET")
    os.symlink(secret_dir / "secret.txt", root / "data" / "to_secret")
    os.symlink(secret_dir, root / "data" / "to_outside_dir")
    os.symlink("plain.txt", root / "data" / "inside_link")  # inside the root: served as the file
    os.symlink("..", root / "data" / "sub" / "loop")  # inside, but a loop
    out = tmp_path / "out"
    with running_server(root) as srv:
        r = drsftp("get", "-r", srv.url("data/"), str(out), timeout=120)
    # the server lists a link leading out of its root as a link (MLSD
    # type=OS.unix=symlink), which the walk skips: nothing fails, nothing is fetched
    assert r.returncode == 0, r.stderr
    assert "Traceback" not in r.stderr
    assert not (out / "to_secret").exists() and not (out / "to_outside_dir").exists()
    for dirpath, _, files in os.walk(out):
        for name in files:
            with open(os.path.join(dirpath, name), "rb") as f:
                assert b"SECRET" not in f.read()
    assert not (out / "to_outside_dir" / "secret.txt").exists()
    assert (out / "inside_link").read_bytes() == (root / "data" / "plain.txt").read_bytes()
    assert not (out / "sub" / "loop" / "sub").exists()  # the loop was not walked again


def _run_get(srv, path, out, hook=None, **jopts):
    """The job in this process, with ``hook`` run once, when the first
    files are planned (transfers start while the walk goes on)."""
    loc = parse_src_url(srv.url(path), None)
    orig = dataset.TreeJob.enqueue
    hooked = []

    def enqueue(self, i, p):
        orig(self, i, p)
        if hook and not hooked and p.transfers:
            hooked.append(p)
            hook(p)

    dataset.TreeJob.enqueue = enqueue
    try:
        return asyncio.run(run_get([loc], str(out), TransferOptions(), JobOptions(recursive=True, **jopts)))
    finally:
        dataset.TreeJob.enqueue = orig


def test_files_that_vanish_or_change_after_the_walk_fail_alone(tree_server, tmp_path):
    srv, root = tree_server
    data = root / "data" / "sub"

    def change(_plan):
        os.unlink(data / "f001.bin")  # vanished: 550
        os.unlink(data / "f005.bin")
        make_file(data / "f002.bin", 12345, seed=77)  # changed: copied as it is now
        make_file(data / "new.bin", 10, seed=1)  # appeared: not in this run

    res = _run_get(srv, "data/sub/", tmp_path / "out", hook=change, sessions=2)
    failed = sorted(os.path.basename(o.path) for o in res.outcomes if o.status == "failed")
    assert failed == ["f001.bin", "f005.bin"]
    assert all("550" in o.error for o in res.outcomes if o.status == "failed")
    assert res.count("ok") == 12 - 2 + 1  # the others, and big.bin
    assert (tmp_path / "out" / "f002.bin").read_bytes() == (data / "f002.bin").read_bytes()
    changed = next(o for o in res.outcomes if o.path.endswith("f002.bin"))
    assert "changed during the copy" in changed.result.extra["note"]
    assert not (tmp_path / "out" / "new.bin").exists()
    assert not [n for n in os.listdir(tmp_path / "out") if n.endswith(".part")]


def test_exit_code_and_count_on_partial_failure_from_the_cli(tree_server, tmp_path):
    srv, _ = tree_server
    r = drsftp("get", srv.url("data/plain.txt"), srv.url("data/missing.txt"), srv.url("data/a..b"),
               str(tmp_path / "o") + "/")
    assert r.returncode == 1
    assert "1 of 3 entries failed" in r.stderr and "missing.txt" in r.stderr
    assert sorted(os.listdir(tmp_path / "o")) == ["a..b", "plain.txt"]


def test_bad_usage_is_one_line(tree_server, tmp_path):
    srv, _ = tree_server
    for argv in (["get", "-r", "-c", "0", srv.url("data"), str(tmp_path)],
                 ["get", "-r", "--checksum", srv.url("data"), str(tmp_path)],
                 ["put", "-r", str(tmp_path / "nope"), srv.url("x/")],
                 ["get", "-r", srv.url("data"), srv.url("x")],
                 ["get", srv.url("data/plain.txt"), srv.url("x")]):
        r = drsftp(*argv)
        assert r.returncode in (1, 2), argv
        assert "Traceback" not in r.stderr, (argv, r.stderr)
        assert r.stderr.strip().splitlines()[-1].startswith(("drsftp: ", "drsftp get: error")), (argv, r.stderr)


def test_json_record_per_file_reuses_the_single_file_fields(tree_server, tmp_path):
    srv, _ = tree_server
    j1, j2 = tmp_path / "one.json", tmp_path / "job.json"
    assert drsftp("get", srv.url("data/plain.txt"), str(tmp_path / "x"), "--json", str(j1)).returncode == 0
    assert drsftp("get", "-r", srv.url("data/sub/ünï dir"), str(tmp_path / "y"), "--json", str(j2)).returncode == 0
    single = set(json.loads(j1.read_text())) - {"timeline"}
    rec = job_records(j2)["files"][0]
    assert single <= set(rec), single - set(rec)


def test_auto_sessions_and_the_job_bar(tree_server, tmp_path):
    srv, root = tree_server
    out = tmp_path / "out"
    r = drsftp("get", "-r", "-c", "auto", "--progress", "always", srv.url("data/"), str(out))
    assert r.returncode == 0, r.stderr
    assert_same_tree(root / "data", out)
    assert "23/23 files" in r.stderr  # the job's bar, in its last state
    assert "rtt" in r.stderr and " x0 " not in r.stderr  # sessions: the most that ran


def test_put_skips_local_names_that_cannot_be_sent_and_read_only_server_fails_cleanly(tree_server, tmp_path):
    srv, root = tree_server
    src = tmp_path / "src"
    src.mkdir()
    (src / "good.txt").write_text("ok")
    with open(os.path.join(os.fsencode(src), b"bad\xff.txt"), "wb") as f:  # not UTF-8
        f.write(b"x")
    (src / "cr\rlf").write_text("x")
    r = drsftp("put", "-r", str(src) + "/", srv.url("names"))
    assert r.returncode == 1 and "2 of 3 entries failed" in r.stderr and "Traceback" not in r.stderr
    assert os.listdir(root / "names") == ["good.txt"]
    with running_server(root, "--read-only") as ro:
        r = drsftp("put", "-r", str(src) + "/", ro.url("names/sub"))
    assert r.returncode == 1 and "Traceback" not in r.stderr
    assert r.stderr.strip().splitlines()[-1].startswith("drsftp: ")


def test_ctrl_c_then_sync_moves_only_what_is_missing(tmp_path):
    root = tmp_path / "srv"
    (root / "big").mkdir(parents=True)
    for i in range(3):
        make_file(root / "big" / f"f{i}", 96 << 20, seed=i)
    out = tmp_path / "out"
    with running_server(root) as srv:
        p = subprocess.Popen([sys.executable, "-m", "drsftp", "get", "-r", "-c", "2", srv.url("big/"), str(out)],
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        try:
            # a .part with data in it (a big file's is sparse until its blocks come)
            assert wait_until(lambda: any(n.endswith(".part") and os.stat(out / n).st_blocks
                                          for n in os.listdir(out)) if out.exists() else False,
                              timeout=30, step=0.005)
            p.send_signal(signal.SIGINT)
            assert p.wait(30) == 130
            err = p.stderr.read().strip()
            assert err == "drsftp: interrupted", err
        finally:
            if p.poll() is None:
                p.kill()
                p.wait()
            p.stderr.close()
        parts = {n[:-5]: os.path.getsize(out / n) for n in os.listdir(out) if n.endswith(".part")}
        assert parts  # cut short
        j = tmp_path / "j.json"
        r = drsftp("get", "-r", "--sync", srv.url("big/"), str(out), "--json", str(j))
        assert r.returncode == 0, r.stderr
    assert_same_tree(root / "big", out)
    recs = {os.path.basename(f["path"]): f for f in job_records(j)["files"]}
    for name in parts:  # only what was missing moved (a big file's .part holds ranges: parallel.get)
        assert recs[name]["bytes"] == (96 << 20) - recs[name]["resumed_from"]
    assert sum(f["bytes"] or 0 for f in recs.values() if f["status"] == "ok") < 3 * (96 << 20)


def test_more_sessions_than_the_server_allows_runs_on_those_it_took(tmp_path):
    root = tmp_path / "srv"
    make_tree(root / "data", depth=2, files=12)
    out = tmp_path / "out"
    with running_server(root, "--max-connections-per-ip", "3") as srv:
        r = drsftp("get", "-r", "-c", "8", srv.url("data/"), str(out), "--json", str(tmp_path / "j.json"))
    assert r.returncode == 0, r.stderr
    assert_same_tree(root / "data", out)
    rec = job_records(tmp_path / "j.json")
    assert len(by_status(rec)["ok"]) == 9 + 12 + 2
    assert rec["sessions_max"] <= 3  # the count came down to what the server took


def test_verify_checks_every_file_of_a_job(tree_server, tmp_path):
    srv, _ = tree_server
    j = tmp_path / "v.json"
    r = drsftp("get", "-r", "--verify", srv.url("data/sub/"), str(tmp_path / "out"), "--json", str(j))
    assert r.returncode == 0, r.stderr
    ok = [f for f in job_records(j)["files"] if f["status"] == "ok"]
    assert len(ok) == 13 and all(f["sha256"] == sha256_file(f["path"]) for f in ok)
    r = drsftp("put", "-r", "--verify", str(tmp_path / "out") + "/", srv.url("v"), "--json", str(j))
    assert r.returncode == 0, r.stderr
    assert all(f["sha256"] for f in job_records(j)["files"] if f["status"] == "ok")


@pytest.mark.parametrize("extra", [(), ("--delete",)])  # (a walk streamed to the workers; one walked first)
def test_get_r_fails_files_named_as_another_files_part_file(tmp_path, extra):
    """``x`` downloads into ``x.part`` (its record: ``x.part.ranges``), and
    a rerun resumes from them: listed files of those names beside ``x`` fail
    with the reason, ``x`` and the others are copied (DATASETS.md,
    "Part-file names")."""
    root = tmp_path / "srv"
    (root / "d").mkdir(parents=True)
    for name, size in (("x", 3 << 20), ("x.part", 12), ("x.part.ranges", 7), ("y.part", 9)):
        make_file(root / "d" / name, size, seed=size)
    out = tmp_path / "out"
    with running_server(root) as srv:
        for again in ((), ("--continue",)):
            r = drsftp("get", "-r", "-c", "4", *extra, *again, srv.url("d/"), str(out))
            assert r.returncode == 1 and "Traceback" not in r.stderr, r.stderr
            assert "/d/x.part: its name is x's part file here: get it on its own" in r.stderr
            assert "/d/x.part.ranges: its name is x's resume record here" in r.stderr
            assert sorted(os.listdir(out)) == ["x", "y.part"]
            for name in ("x", "y.part"):
                assert sha256_file(out / name) == sha256_file(root / "d" / name)
