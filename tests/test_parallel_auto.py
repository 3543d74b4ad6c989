"""-P auto's drivers: a scripted controller's ADD and REMOVE open and end
ranged sessions, and connect and retire MODE E streams mid-transfer (the
EOD count covers every stream used); every file byte-identical."""

import asyncio
import json
import os

import pytest
from conftest import PASSWORD, USER, make_file, sha256_file
from test_parallel_peers import throttled_server  # noqa: F401 (fixture)

from drsftp.client.streams import monitor, parallel
from drsftp.client.transfer.getput import TransferOptions
from drsftp.ftp.url import parse_url
from drsftp.tuning.count.streams import Action, StreamController

MiB = 1 << 20


class Scripted:
    """Returns the given actions, one per interval, then HOLD; keeps what
    the driver applied (a refused action is undone, as the real one does)."""

    stream_window = None  # (the streams alone: no window per stream)

    def __init__(self, actions, start=2):
        self.streams, self.actions, self.refusals, self.applied = start, list(actions), [], []

    def update(self, goodput, samples, intervals_left=None, path=None):
        assert goodput >= 0 and all(s.rtt is None or s.rtt > 0 for s in samples)
        action = self.actions.pop(0) if self.actions else Action.HOLD
        self.streams += {Action.ADD: 1, Action.REMOVE: -1}.get(action, 0)
        if action is not Action.HOLD:
            self.applied.append(self.streams)
        return action

    def refused(self, action, running=None):
        self.refusals.append(action)
        self.streams -= {Action.ADD: 1, Action.REMOVE: -1}.get(action, 0)
        assert running is None or running == self.streams
        self.applied.pop()


@pytest.fixture
def scripted(monkeypatch):
    made = []

    def factory(actions, interval):
        monkeypatch.setattr(parallel, "_controller",
                            lambda streams, ctl, opts: made.append(Scripted(actions)) or made[-1])
        monkeypatch.setattr(StreamController, "interval", staticmethod(lambda rtt: interval))
        monkeypatch.setattr(monitor, "TICK", interval / 2)
        return made

    return factory


def _opts():
    return TransferOptions(progress=False, use_drs_command=True, idle_timeout=30)


def test_auto_ranged_opens_and_ends_sessions(throttled_server, scripted, tmp_path):  # noqa: F811
    # 2 MB/s per connection after a first burst (the socket buffers): ~3 s
    root, port = throttled_server
    src = make_file(root / "f.bin", 24 * MiB, seed=20)
    made = scripted([Action.HOLD, Action.ADD, Action.ADD, Action.HOLD, Action.REMOVE], interval=0.3)
    loc = parse_url(f"ftp://{USER}:{PASSWORD}@127.0.0.1:{port}/f.bin")
    dest = str(tmp_path / "out.bin")
    result = asyncio.run(parallel.get(loc, dest, _opts(), None))
    d = result.to_dict()
    done = [c["streams"] for c in d["stream_changes"]]
    # ADD, ADD, REMOVE as scripted; an ADD is refused (undone) when no range
    # is left worth a session
    assert done == made[0].applied and done[0] == 3 and done[-2:] == [done[-2], done[-2] - 1], done
    assert d["streams"] == 2 + (len(done) - 1) and d["mode"] == "ranged" and d["parallel"] == "auto"
    assert sum(s["bytes"] for s in d["per_stream"]) == 24 * MiB
    assert sha256_file(dest) == sha256_file(src)
    line = [row["bytes"] for row in d["timeline"]]  # the summed timeline, every quarter second
    assert len(line) >= 4 and line == sorted(line) and line[-1] <= 24 * MiB
    assert 1 <= max(row["streams"] for row in d["timeline"]) <= 4  # data connections reading at each tick
    json.dumps(d)  # the JSON the CLI writes


def test_auto_mode_e_put_connects_and_retires_streams(server, scripted, tmp_path):
    src = make_file(tmp_path / "up.bin", 48 * MiB, seed=21)
    made = scripted([Action.ADD, Action.ADD, Action.REMOVE], interval=0.005)
    loc = parse_url(server.url("up.bin"))
    opts = _opts()
    opts.tuning = "fixed:256K"  # a slower loopback put: the script runs before it ends
    result = asyncio.run(parallel.put(str(src), loc, opts, None))
    d = result.to_dict()
    done = [c["streams"] for c in d["stream_changes"]]
    # the first ADD comes 5 ms in, with blocks left; a later one is refused
    # once every block is taken (the driver cannot add a stream then)
    assert done[:1] == [3] and done == made[0].applied, (done, made[0].refusals)
    adds = sum(1 for a, b in zip([2] + done, done) if b > a)
    # every stream used, a retired one too (the server counted its EOD)
    assert d["streams"] == 2 + adds
    assert sum(s["bytes"] for s in d["per_stream"]) == 48 * MiB
    assert sha256_file(os.path.join(server.root, "up.bin")) == sha256_file(src)
