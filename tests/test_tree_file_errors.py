"""Every per-file error of a dataset job lands in its report as that
file's failure, with its reason (docs/DATASETS.md, "Failures and bad
input"), also where the file's paths cannot be made: the job's workers
(stream mode, cached extended-block sessions, a big file's own sessions)
take the error as the file's, and the other files go on.  The job runs in
this process against `drsftp serve`, TreeJob.paths refusing one file as it
would a name that may not become a path."""

from __future__ import annotations

import asyncio
import os

import pytest
from conftest import PASSWORD, USER, make_file, running_server

from drsftp.client.transfer.getput import TransferOptions
from drsftp.client.trees.cached import worker as cachedjob
from drsftp.client.trees.dataset import run_get, run_put
from drsftp.client.trees.job.treejob import JobOptions, TreeJob
from drsftp.ftp.safepath import UnsafePath
from drsftp.ftp.url import parse_url

BAD = "bad.bin"
SIZES = {"a.bin": 70_000, BAD: 50_000, "c.bin": 1_000, "big.bin": 300_000}


@pytest.fixture
def refusing_paths(monkeypatch):
    """TreeJob.paths raises UnsafePath for BAD, as for a name it may not join."""
    paths = TreeJob.paths

    def refused(self, item):
        if item.t.rel and item.t.rel[-1] == BAD:
            raise UnsafePath(f"unsafe name {BAD!r}: refused here")
        return paths(self, item)

    monkeypatch.setattr(TreeJob, "paths", refused)


def check(result, where: str) -> None:
    by_name = {os.path.basename(o.path): o for o in result.outcomes}
    assert set(by_name) == set(SIZES), [(o.path, o.status, o.error) for o in result.outcomes]
    bad = by_name[BAD]
    assert bad.status == "failed" and "refused here" in bad.error, bad
    assert bad.path == os.path.join(where, BAD)
    assert all(o.status == "ok" for name, o in by_name.items() if name != BAD), result.outcomes


@pytest.mark.parametrize("cached", [True, False], ids=["cached", "stream-mode"])
@pytest.mark.parametrize("big", [False, True], ids=["small", "big-file-sessions"])
def test_a_file_whose_paths_fail_is_reported_failed(tmp_path, refusing_paths, monkeypatch, cached, big):
    if big:  # BAD runs as a big file does, on sessions of its own (cachedjob.big_get/big_put)
        monkeypatch.setattr(cachedjob, "BIG_FILE", 40_000)
    srv_root = tmp_path / "srv"
    (srv_root / "d").mkdir(parents=True)
    local = tmp_path / "local"
    local.mkdir()
    for name, size in SIZES.items():
        make_file(srv_root / "d" / name, size, seed=size)
        make_file(local / name, size, seed=size)
    jopts = JobOptions(recursive=True, sessions=2, cached=cached, progress=False)
    with running_server(srv_root) as srv:
        src = parse_url(f"ftp://{USER}:{PASSWORD}@127.0.0.1:{srv.port}/d/")
        out = tmp_path / "out"
        result = asyncio.run(run_get([(src, True)], f"{out}/", TransferOptions(), jopts))
        check(result, str(out))
        assert not os.path.exists(out / BAD)
        dst = parse_url(f"ftp://{USER}:{PASSWORD}@127.0.0.1:{srv.port}/up/")
        result = asyncio.run(run_put([f"{local}/"], dst, TransferOptions(), jopts))
        check(result, str(local))
        assert not os.path.exists(srv_root / "up" / BAD)
