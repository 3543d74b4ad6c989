"""Dataset gets on cached extended-block data channels (drsftp.client.
cached.get): the streams carry file after file, pipelined, against drsftp
serve and globus-gridftp-server; the routing of bytes between transfers
against a scripted server."""

import asyncio
import os
import socket
import threading

import pytest
from conftest import PASSWORD, USER, drsftp, make_file, running_server, wait_until
from dataset_util import assert_on_reused_streams, assert_same_tree, by_status, job_records, make_tree
from test_parallel_peers import gridftp  # noqa: F401 (a fixture)

from drsftp.client.session.control import ControlConnection
from drsftp.client.transfer.getput import TransferOptions
from drsftp.client.trees.cached.get import CachedGets
from drsftp.ftp.eblock import Desc, header


def _ok_records(path):
    recs = job_records(path)
    return recs, [r for r in recs["files"] if r["status"] == "ok"]


def test_get_r_on_cached_streams_from_drsftp_serve(tmp_path):
    src = make_tree(tmp_path / "srv" / "data")
    out = tmp_path / "out"
    with running_server(tmp_path / "srv") as srv:
        r = drsftp("get", "-r", "-c", "2", "-P", "2", "--json", str(tmp_path / "j.json"),
                   f"ftp://{USER}:{PASSWORD}@127.0.0.1:{srv.port}/data/", f"{out}/")
    assert r.returncode == 0, r.stderr
    assert_same_tree(src, out)
    recs, ok = _ok_records(tmp_path / "j.json")
    assert recs["sessions_max"] <= 2 + 1  # the walk's session, then at most -c
    assert len(ok) > 20 and all(x["streams"] == 2 for x in ok), ok[0]
    assert_on_reused_streams(ok, 2)


def test_get_r_on_cached_streams_from_gridftp(gridftp, tmp_path):  # noqa: F811
    d, port = gridftp
    # ASCII names: globus-gridftp-server here answers 550/500 for non-ASCII
    # ones (its own file layer; the non-ASCII cases run against drsftp serve)
    src = os.path.join(d, "tree")
    for rel, size in [("a file.bin", 700_000), ("empty.dat", 0), ("sub/x.bin", 3 << 20), ("sub/deep/y", 5),
                      ("sub/z z", 65536)]:
        os.makedirs(os.path.dirname(os.path.join(src, rel)), exist_ok=True)
        make_file(os.path.join(src, rel), size, seed=size)
    os.makedirs(os.path.join(src, "empty dir"))
    for dirpath, dirnames, filenames in os.walk(src):  # the server runs as nobody
        for n in dirnames + filenames:
            os.chmod(os.path.join(dirpath, n), 0o755)
    out = tmp_path / "out"
    r = drsftp("get", "-r", "-c", "3", "-P", "2", "--json", str(tmp_path / "j.json"),
               f"ftp://127.0.0.1:{port}{src}/", f"{out}/")
    assert r.returncode == 0, r.stderr
    assert_same_tree(src, out)
    _, ok = _ok_records(tmp_path / "j.json")
    assert_on_reused_streams(ok, 3)


def test_stream_mode_flag_and_resume_on_cached_streams(tmp_path):
    srv_root = tmp_path / "srv"
    data = srv_root / "data"
    data.mkdir(parents=True)
    for i in range(6):
        make_file(data / f"f{i}.bin", 300_000 + i, seed=i)
    out = tmp_path / "out"
    out.mkdir()
    whole = (data / "f3.bin").read_bytes()
    (out / "f3.bin.part").write_bytes(whole[:100_000])  # an earlier, interrupted copy
    url = f"ftp://{USER}:{PASSWORD}@127.0.0.1:{{}}/data/"
    with running_server(srv_root) as srv:
        r = drsftp("get", "-r", "--continue", "--json", str(tmp_path / "a.json"), url.format(srv.port), f"{out}/")
        assert r.returncode == 0, r.stderr
        r2 = drsftp("get", "-r", "--stream-mode", "--json", str(tmp_path / "b.json"), url.format(srv.port),
                    f"{tmp_path / 'out2'}/")
        assert r2.returncode == 0, r2.stderr
    assert_same_tree(data, out)
    assert_same_tree(data, tmp_path / "out2")
    _, ok = _ok_records(tmp_path / "a.json")
    f3 = next(x for x in ok if x["path"].endswith("f3.bin"))
    assert "cached" in f3 and f3["resumed_from"] == 100_000 and f3["bytes"] == len(whole) - 100_000
    _, ok2 = _ok_records(tmp_path / "b.json")
    assert ok2 and not any("cached" in x for x in ok2)  # stream mode: no cached session


def test_a_failed_file_leaves_the_others_on_the_session(tmp_path):
    srv_root = tmp_path / "srv"
    (srv_root / "data").mkdir(parents=True)
    for i in range(5):
        make_file(srv_root / "data" / f"f{i}.bin", 50_000, seed=i)
    out = tmp_path / "out"
    with running_server(srv_root) as srv:
        base = f"ftp://{USER}:{PASSWORD}@127.0.0.1:{srv.port}/data"
        r = drsftp("get", "-c", "1", "--json", str(tmp_path / "j.json"), f"{base}/f0.bin", f"{base}/f1.bin",
                   f"{base}/missing.bin", f"{base}/f2.bin", f"{out}/")
    assert r.returncode == 1
    st = by_status(job_records(tmp_path / "j.json"))
    assert len(st["ok"]) == 3 and len(st["failed"]) == 1, st
    assert sorted(os.listdir(out)) == ["f0.bin", "f1.bin", "f2.bin"]


# -- a scripted server: the routing of bytes between transfers ---------------------------


class Scripted:
    """Answers MODE E, OPTS and PORT, then plays ``script(ctl, data)`` once
    the RETRs it waits for have come."""

    def __init__(self, retrs, script):
        self.lst = socket.create_server(("127.0.0.1", 0))
        self.lst.settimeout(10)
        self.port = self.lst.getsockname()[1]
        self.retrs, self.script = retrs, script
        self.error = None
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        try:
            ctl, _ = self.lst.accept()
            ctl.settimeout(10)
            ctl.sendall(b"220 scripted\r\n")
            f = ctl.makefile("rb")
            port, seen = None, 0
            while seen < self.retrs:
                line = f.readline().decode().strip()
                verb = line.split(" ")[0].upper()
                if verb == "PORT":
                    n = [int(x) for x in line[5:].split(",")]
                    port = n[4] * 256 + n[5]
                if verb == "RETR":
                    seen += 1
                else:
                    ctl.sendall(b"200 ok\r\n")
            data = socket.create_connection(("127.0.0.1", port), timeout=10)
            self.script(ctl, data)
            try:
                assert data.recv(1) == b""  # until the client closes it (its session ended)
            except ConnectionResetError:
                pass
            data.close()
            ctl.close()
        except Exception as exc:  # reported by the test
            self.error = exc


def _block(offset, payload):
    return header(0, len(payload), offset) + payload


END = header(Desc.EOD | Desc.EOF, 0, 1)


def _session():
    """Where the scripted server's thread finds the client's session."""
    return {"cg": None}


async def _fetch(port, tmp_path, names, seen=None, timeout=10):
    ctl = await ControlConnection.open("127.0.0.1", port)
    ctl.features = {"PARALLEL"}
    cg = CachedGets(ctl, TransferOptions(), 1)
    if seen is not None:
        seen["cg"] = cg
    cg.open()
    files = [cg.request(n, str(tmp_path / n), None, 0, None) for n in names]
    try:
        await asyncio.wait_for(asyncio.gather(*(f.done for f in files), return_exceptions=True), timeout)
    finally:
        await cg.close()
        await ctl.close()
    return cg, files


def test_bytes_of_the_next_transfer_wait_for_its_reply(tmp_path):
    """The second file's blocks come before the server's 125 for it: the
    stream pauses until the reply names the transfer, then routes them."""
    a, b = os.urandom(70_000), os.urandom(50_000)
    seen = _session()

    def script(ctl, data):
        ctl.sendall(b"150 a\r\n")
        data.sendall(_block(0, a) + END + _block(0, b[:20_000]) + _block(20_000, b[20_000:]) + END)
        # b's bytes are in, its transfer not yet answered: the stream pauses
        assert wait_until(lambda: any(sink.paused for sink in seen["cg"].sinks), 10), "the stream never paused"
        ctl.sendall(b"226 a\r\n125 b\r\n226 b\r\n")

    srv = Scripted(2, script)
    _, files = asyncio.run(_fetch(srv.port, tmp_path, ["a", "b"], seen))
    srv.thread.join(10)
    assert srv.error is None, srv.error
    assert [f.done.exception() for f in files] == [None, None]
    assert (tmp_path / "a.part").read_bytes() == a
    assert (tmp_path / "b.part").read_bytes() == b


def test_a_refused_transfer_between_is_skipped(tmp_path):
    """550 for the middle RETR: the bytes after the first EOD go to the third."""
    a, c = os.urandom(10_000), os.urandom(20_000)

    def script(ctl, data):
        ctl.sendall(b"150 a\r\n")
        data.sendall(_block(0, a) + END + _block(0, c) + END)
        ctl.sendall(b"226 a\r\n550 no such file\r\n125 c\r\n226 c\r\n")

    srv = Scripted(3, script)
    cg, files = asyncio.run(_fetch(srv.port, tmp_path, ["a", "b", "c"]))
    srv.thread.join(10)
    assert srv.error is None, srv.error
    assert files[0].done.exception() is None and files[2].done.exception() is None
    assert "550" in str(files[1].done.exception())
    assert (tmp_path / "c.part").read_bytes() == c
    assert not (tmp_path / "b.part").exists()
    assert cg.broken is None


HOSTILE = {
    # case: (the bytes after 150, what a.part holds after: the accepted blocks)
    "no transfer asked": (lambda a: _block(0, a) + END + _block(0, b"x" * 100) + END, lambda a: a),
    "overlap": (lambda a: _block(0, a) + _block(5_000, b"z" * 100) + END, lambda a: a),
    # a lower block second, running into the range received before it: the part keeps what is whole from its
    # start, nothing here (a rerun resumes a part's size: its hole would be taken as held)
    "overlap into a range above": (lambda a: _block(5_000, a[5_000:]) + _block(0, b"z" * 5_001) + END,
                                   lambda a: b""),
}


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_hostile_bytes_fail_the_session_and_write_nothing_else(tmp_path, case):
    a = os.urandom(10_000)
    sent, kept = HOSTILE[case]
    seen = _session()

    def script(ctl, data):
        ctl.sendall(b"150 a\r\n")
        data.sendall(sent(a))
        # the session breaks on them before a's 226 could end a's transfer
        assert wait_until(lambda: seen["cg"].broken is not None, 10), "the hostile bytes went unseen"
        ctl.sendall(b"226 a\r\n")

    srv = Scripted(1, script)
    cg, files = asyncio.run(_fetch(srv.port, tmp_path, ["a"], seen))
    srv.thread.join(10)
    assert srv.error is None, srv.error
    assert cg.broken is not None and "extended block mode" in str(cg.broken)
    assert isinstance(files[0].done.exception(), Exception)
    assert sorted(os.listdir(tmp_path)) == ["a.part"]
    assert (tmp_path / "a.part").read_bytes() == kept(a)  # nothing of the refused block


def test_a_big_file_in_a_tree_gets_streams_of_its_own_both_ways(tmp_path):
    """64 MiB or more: get/put -P auto on sessions of its own, started
    first (largest first); the small files go on the cached sessions."""
    src = tmp_path / "src"
    src.mkdir()
    make_file(src / "big.bin", 64 << 20, seed=1)
    for i in range(8):
        make_file(src / f"s{i}.bin", 100_000, seed=10 + i)
    (tmp_path / "srv").mkdir()
    base = f"ftp://{USER}:{PASSWORD}@127.0.0.1:{{}}/tree/"
    with running_server(tmp_path / "srv") as srv:
        r = drsftp("put", "-r", "-c", "2", "--json", str(tmp_path / "p.json"), f"{src}/", base.format(srv.port))
        assert r.returncode == 0, r.stderr
        r = drsftp("get", "-r", "-c", "2", "--json", str(tmp_path / "g.json"), base.format(srv.port),
                   f"{tmp_path / 'out'}/")
        assert r.returncode == 0, r.stderr
    assert_same_tree(src, tmp_path / "srv" / "tree")
    assert_same_tree(src, tmp_path / "out")
    for name in ("p.json", "g.json"):
        files = job_records(tmp_path / name)["files"]
        big = next(x for x in files if x["path"].endswith("big.bin"))
        assert big["mode"] == "E" and big["parallel"] == "auto" and "cached" not in big, big
        assert_on_reused_streams([x for x in files if not x["path"].endswith("big.bin")], 2)


def test_a_bad_P_for_a_job_is_one_sentence():
    for bad in ("0", "65", "x"):
        r = drsftp("get", "-r", "-P", bad, "ftp://127.0.0.1:9/x/", "/nonexistent/dest/")
        assert r.returncode == 2 and "Traceback" not in r.stderr
        assert r.stderr.strip() == (f"drsftp: error: argument -P/--parallel: 1 to 64 streams or auto, not {bad!r}; "
                                    "see drsftp get --help"), r.stderr


def test_sync_checksum_on_cached_streams_fetches_only_what_differs(tmp_path):
    """--checksum sends HASH on the cached session between pipelined RETRs
    while its streams' DRS exchange runs: every reply must stay paired."""
    data = tmp_path / "srv" / "data"
    data.mkdir(parents=True)
    out = tmp_path / "out"
    out.mkdir()
    for i in range(12):
        make_file(data / f"f{i}.bin", 2 << 20, seed=i)
        make_file(out / f"f{i}.bin", 2 << 20, seed=i if i % 2 else 100 + i)  # odd ones already right
        os.utime(out / f"f{i}.bin", (1, 1))  # older: --sync looks at them
    with running_server(tmp_path / "srv") as srv:
        r = drsftp("get", "-r", "--sync", "--checksum", "-c", "1", "-P", "2", "--json", str(tmp_path / "j.json"),
                   f"ftp://{USER}:{PASSWORD}@127.0.0.1:{srv.port}/data/", f"{out}/")
    assert r.returncode == 0, r.stderr
    assert_same_tree(data, out)
    st = by_status(job_records(tmp_path / "j.json"))
    assert len(st["ok"]) == 6 and len(st["skipped"]) == 6, st
