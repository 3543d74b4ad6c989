"""The client's reads of a ranged body come in batches (SO_RCVLOWAT:
docs/DESIGN.md#http-rcvlowat), and a connection's mark is back at 1 once
its body ended (a kept-alive connection's next answer must wake it)."""

from __future__ import annotations

import os

import pytest
from httpfake import FakeServer, sha256

from drsftp.cli import main
from drsftp.io import sockopt

SIZE = 24 << 20


@pytest.fixture
def server(tmp_path):
    root = tmp_path / "root"
    root.mkdir()
    (root / "big.bin").write_bytes(os.urandom(SIZE))
    s = FakeServer(str(root)).start()
    yield s
    s.stop()


@pytest.mark.parametrize("streams", ["1", "3"])
def test_a_body_is_read_in_batches_and_the_mark_ends_at_one(server, tmp_path, monkeypatch, streams):
    marks: dict[int, list[int]] = {}
    real = sockopt.set_rcvlowat

    def spy(sock, value):
        marks.setdefault(sock.fileno(), []).append(value)
        real(sock, value)

    monkeypatch.setattr(sockopt, "set_rcvlowat", spy)
    out = tmp_path / "out.bin"
    assert main(["get", "-q", "-P", streams, "--tuning", "fixed:4M", server.url("/big.bin"), str(out)]) == 0
    assert sha256(out) == sha256(os.path.join(server.root, "big.bin"))
    assert marks and any(v > 1 for values in marks.values() for v in values), marks  # batched
    assert all(values[-1] == 1 for values in marks.values()), marks  # and 1 once each body ended
