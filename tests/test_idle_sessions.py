"""Sessions that wait while a slow walk goes on, against a server that
closes idle sessions (`drsftp serve --idle-timeout`): kept alive by NOOP,
or, with the keepalive off, replaced without failing a file or directory
(docs/DATASETS.md, "Idle sessions")."""

import asyncio

import pytest
from conftest import make_file, running_server

from drsftp.client.session.control import ControlConnection
from drsftp.client.transfer.getput import TransferOptions
from drsftp.client.trees import remote
from drsftp.client.trees.dataset import run_get
from drsftp.client.trees.job import sessions as jobmod
from drsftp.client.trees.job.treejob import JobOptions
from drsftp.ftp.url import parse_url


def _slow_walk_get(tmp_path, monkeypatch, cached: bool, sessions: int | None, idle_timeout: str) -> dict:
    """A get -r of a tree whose walk takes about 3.5 s (a chain of 5
    directories, each listing followed by 0.6 s) with a short --idle-timeout: the
    workers wait for the walk past the timeout, and so do the listers (under
    -c auto, the one that listed ``e`` beside the chain's)."""
    root = tmp_path / "srv"
    chain = root / "t" / "d1" / "d2" / "d3" / "d4" / "d5"
    chain.mkdir(parents=True)
    (root / "t" / "e").mkdir()
    make_file(root / "t" / "e" / "c", 500)
    for k in range(3):
        make_file(root / "t" / f"a{k}", 1000 + k, seed=k)
        make_file(chain / f"b{k}", 2000 + k, seed=k + 9)
    seen = {"timed_out": 0, "noop": 0}
    listing, dispatch, start = remote.RemoteSession.listing, ControlConnection._dispatch, ControlConnection.start

    async def slow(self, path, on_entries=None):
        entries = await listing(self, path, on_entries)
        if "/d" in path:
            await asyncio.sleep(0.6)
        return entries

    def watch_replies(self, reply):
        if reply.code == 421 and "timed out" in reply.first:  # (pyftpdlib's idle timeout)
            seen["timed_out"] += 1
        return dispatch(self, reply)

    def watch_commands(self, line):
        seen["noop"] += line == "NOOP"
        return start(self, line)

    monkeypatch.setattr(remote.RemoteSession, "listing", slow)
    monkeypatch.setattr(ControlConnection, "_dispatch", watch_replies)
    monkeypatch.setattr(ControlConnection, "start", watch_commands)
    jopts = JobOptions(recursive=True, sessions=sessions, progress=False)  # --retries 0
    jopts.cached = cached
    with running_server(root, "--idle-timeout", idle_timeout) as srv:
        res = asyncio.run(asyncio.wait_for(
            run_get([(parse_url(srv.url("t")), False)], str(tmp_path / "out"), TransferOptions(progress=False),
                    jopts), 50))
    outcomes = [(o.path, o.status, o.error) for o in res.outcomes]
    assert len(outcomes) == 7 and all(status == "ok" for _, status, _ in outcomes), outcomes
    for k in range(3):
        assert (tmp_path / "out" / "d1" / "d2" / "d3" / "d4" / "d5" / f"b{k}").stat().st_size == 2000 + k
    return seen


@pytest.mark.parametrize("cached", [False, True])
@pytest.mark.parametrize("sessions", [None, 2])
def test_waiting_sessions_are_kept_alive_by_noop(tmp_path, monkeypatch, cached, sessions):
    monkeypatch.setattr(jobmod, "KEEPALIVE", 0.3)
    # (2 s: a NOOP every 0.3 s stays well inside it on a loaded machine)
    seen = _slow_walk_get(tmp_path, monkeypatch, cached, sessions, "2")
    assert seen["noop"] > 0
    assert seen["timed_out"] == 0  # no session the job held went stale


@pytest.mark.parametrize("cached", [False, True])
@pytest.mark.parametrize("sessions", [None, 2])
def test_without_keepalive_a_stale_session_is_replaced_failing_nothing(tmp_path, monkeypatch, cached, sessions):
    monkeypatch.setattr(jobmod, "KEEPALIVE", 3600.0)
    seen = _slow_walk_get(tmp_path, monkeypatch, cached, sessions, "1")
    assert seen["noop"] == 0
    assert seen["timed_out"] > 0  # sessions did go stale while they waited (and every file is ok)
