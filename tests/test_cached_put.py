"""Dataset puts on cached extended-block data channels (drsftp.client.
cached.put) against drsftp serve and globus-gridftp-server."""

import os

from conftest import PASSWORD, USER, drsftp, make_file, running_server
from dataset_util import assert_on_reused_streams, assert_same_tree, by_status, job_records, make_tree
from test_parallel_peers import gridftp  # noqa: F401 (a fixture)


def test_put_r_on_cached_streams_to_drsftp_serve_then_sync_moves_nothing(tmp_path):
    src = make_tree(tmp_path / "src")
    (tmp_path / "srv").mkdir()
    url = f"ftp://{USER}:{PASSWORD}@127.0.0.1:{{}}/up/"
    with running_server(tmp_path / "srv") as srv:
        r = drsftp("put", "-r", "-c", "2", "-P", "2", "--json", str(tmp_path / "j.json"), f"{src}/",
                   url.format(srv.port))
        assert r.returncode == 0, r.stderr
        assert_same_tree(src, tmp_path / "srv" / "up")
        ok = [x for x in job_records(tmp_path / "j.json")["files"] if x["status"] == "ok"]
        assert len(ok) > 20 and all(x["streams"] == 2 for x in ok), ok[0]
        assert_on_reused_streams(ok, 2)
        # MFMT set every file's time: a --sync rerun finds them all complete
        r = drsftp("put", "-r", "--sync", "--json", str(tmp_path / "k.json"), f"{src}/", url.format(srv.port))
        assert r.returncode == 0, r.stderr
    st = by_status(job_records(tmp_path / "k.json"))
    assert "ok" not in st and len(st["skipped"]) == len(ok)


def test_a_refused_stor_among_pipelined_ones_fails_alone(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    for i in range(6):
        make_file(src / f"f{i}.bin", 200_000 + i, seed=i)
    root = tmp_path / "srv"
    (root / "up" / "f3.bin").mkdir(parents=True)  # a directory where the upload would go
    with running_server(root) as srv:
        r = drsftp("put", "-c", "1", "--json", str(tmp_path / "j.json"), *sorted(str(p) for p in src.iterdir()),
                   f"ftp://{USER}:{PASSWORD}@127.0.0.1:{srv.port}/up/")
    assert r.returncode == 1
    st = by_status(job_records(tmp_path / "j.json"))
    assert len(st["ok"]) == 5 and len(st["failed"]) == 1 and next(iter(st["failed"])).endswith("f3.bin"), st
    for i in (0, 1, 2, 4, 5):
        assert (root / "up" / f"f{i}.bin").read_bytes() == (src / f"f{i}.bin").read_bytes()
    assert not [n for n in os.listdir(root / "up") if n.endswith(".part")]


def test_put_r_on_cached_streams_to_gridftp(gridftp, tmp_path):  # noqa: F811
    d, port = gridftp
    src = tmp_path / "src"
    for rel, size in [("a file.bin", 700_000), ("empty.dat", 0), ("sub/x.bin", 3 << 20), ("sub/deep/y", 5)]:
        (src / rel).parent.mkdir(parents=True, exist_ok=True)
        make_file(src / rel, size, seed=size)
    up = os.path.join(d, "up")
    os.mkdir(up)
    os.chmod(up, 0o777)  # the server writes as nobody
    r = drsftp("put", "-r", "-c", "2", "-P", "2", "--json", str(tmp_path / "j.json"), f"{src}/",
               f"ftp://127.0.0.1:{port}{up}/")
    assert r.returncode == 0, r.stderr
    assert_same_tree(src, up)
    ok = [x for x in job_records(tmp_path / "j.json")["files"] if x["status"] == "ok"]
    assert_on_reused_streams(ok, 2)


def test_every_cached_stream_of_a_put_sends_without_nagles_delay(tmp_path, monkeypatch):
    """Each file's tail goes at once, not after the ACK of the file before
    (docs/DESIGN.md#eod-nodelay): every stream opened carries TCP_NODELAY."""
    import socket

    from drsftp.cli import main
    from drsftp.client.trees.cached import put as cached_put

    opened: list[int] = []
    real_open = cached_put.CachedPuts.open

    async def spying_open(self):
        await real_open(self)
        opened.extend(s.sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) for s in self.opened)

    monkeypatch.setattr(cached_put.CachedPuts, "open", spying_open)
    src = make_tree(tmp_path / "src")
    (tmp_path / "srv").mkdir()
    with running_server(tmp_path / "srv") as srv:
        code = main(["put", "-q", "-r", "-c", "1", "-P", "3", f"{src}/",
                     f"ftp://{USER}:{PASSWORD}@127.0.0.1:{srv.port}/up/"])
    assert code == 0
    assert_same_tree(src, tmp_path / "srv" / "up")
    assert len(opened) == 3 and all(opened), opened
