"""A job's sessions and a big file's streams, counted on the server's side
(its log of logins, and with -vv of the commands it was sent): -c auto
opens no more sessions than there are files or directories waiting, and
what the fleet controller decides (sessions, a big file's streams) is
applied (docs/DATASETS.md, "Sessions x streams")."""

import asyncio
import re

from conftest import PASSWORD, PY, USER, ServerProcess, drsftp, make_file, running_server, sha256_file
from dataset_util import assert_same_tree

from drsftp.client.transfer.getput import TransferOptions
from drsftp.client.trees.dataset import JobOptions, run_get
from drsftp.client.trees.job.cli import parse_src_url
from drsftp.tuning.count.fleet import FleetConfig

MiB = 1 << 20
# A controller that adds a session or a stream at every chance and keeps it
# (every gain is enough, no queue counts): what it decides shows at once.
EAGER = FleetConfig(start_sessions=2, session_settle=1, settle=1, judge=1, session_gain=-1.0, min_gain=-1.0,
                    gain_share=-1.0, queue_factor=1e6, queue_slack=1e3)
SLOW = ("--tuning", "fixed:8k")  # 8 KiB buffers at the server: a job of 100 MiB lasts seconds on loopback


def _logins(srv) -> int:
    return len(re.findall(r" login .*ok=yes", srv.stderr_text()))


def _job(srv, path, out, **jopts):
    return asyncio.run(run_get([parse_src_url(srv.url(path), None)], str(out), TransferOptions(progress=False),
                               JobOptions(recursive=True, **jopts)))


def test_auto_opens_no_more_sessions_than_files_or_directories_waiting(tmp_path):
    root = tmp_path / "srv"
    (root / "five").mkdir(parents=True)
    for i in range(5):
        make_file(root / "five" / f"f{i}.bin", 100_000 + i, seed=i)
    out = tmp_path / "out"
    with running_server(root) as srv:
        runs = [("get", "-r", srv.url("five/"), str(out)),  # 5 files, 1 directory
                ("get", "-r", "--sync", srv.url("five/"), str(out)),  # nothing to move: the listing's session
                ("put", "-r", str(out) + "/", srv.url("back")),
                ("put", "-r", "--sync", str(out) + "/", srv.url("back")),
                ("get", srv.url("five/f0.bin"), srv.url("five/f1.bin"), str(tmp_path / "two") + "/")]
        counts = []
        for args in runs:
            before = _logins(srv)
            r = drsftp(*args)
            assert r.returncode == 0, r.stderr
            counts.append(_logins(srv) - before)
    assert_same_tree(root / "five", out)
    assert counts[0] <= 6 and counts[1] == 1 and counts[2] <= 6 and counts[3] == 1 and counts[4] <= 2, counts


def test_the_controllers_added_sessions_reach_the_server(tmp_path):
    root = tmp_path / "srv"
    (root / "many").mkdir(parents=True)
    for i in range(200):
        make_file(root / "many" / f"f{i:03}.bin", MiB // 2, seed=i)
    with running_server(root, *SLOW) as srv:
        res = _job(srv, "many/", tmp_path / "out", sessions=None, fleet=EAGER)
        logins = _logins(srv)
    assert res.count("ok") == 200
    # 2 to start (and the listing's): more only if the controller's steps were applied
    assert logins >= 5 and res.sessions_max >= 4, (logins, res.sessions_max)
    assert_same_tree(root / "many", tmp_path / "out")


def test_the_controllers_added_streams_reach_the_server(tmp_path):
    root = tmp_path / "srv"
    (root / "one").mkdir(parents=True)
    src = make_file(root / "one" / "big.bin", 64 * MiB, seed=1)  # a job's big file: -P auto on its own sessions
    srv = ServerProcess(root, cmd=[PY, "-m", "drsftp", "-vv", "serve", "--root", str(root), "--port", "0",
                                   "--user", USER, "--password", PASSWORD, *SLOW])
    try:
        res = _job(srv, "one/", tmp_path / "out", sessions=None, fleet=EAGER)
        asked = [int(n) for n in re.findall(r"<- DRS streams=(\d+)", srv.stderr_text())]
    finally:
        srv.stop()
    assert res.count("ok") == 1 and sha256_file(tmp_path / "out" / "big.bin") == sha256_file(src)
    assert asked and max(asked) >= 3, asked  # the server was asked for more streams while it sent
