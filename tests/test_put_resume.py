"""`drsftp put -P N --continue` against a MODE E server: only the ranges the
server lacks are sent (REST a-b,... then STOR, GFD.20), from the ranges its
111 Range Markers reported (docs/PARALLEL.md, "Resume")."""

import json
import os
import signal
import sys

import pytest
from conftest import PASSWORD, USER, drsftp, make_file, running_server, sha256_file, wait_until
from test_parallel_peers import gridftp  # noqa: F401 (a fixture)

from drsftp.client.streams.modee.send import BlockQueue
from drsftp.client.transfer import putresume
from drsftp.ftp.eblock import RangeSet
from drsftp.ftp.url import parse_url

MiB = 1 << 20


def _record(src, url, state):
    os.environ["XDG_STATE_HOME"] = str(state)
    try:
        return putresume.record_base(str(src), parse_url(url))
    finally:
        del os.environ["XDG_STATE_HOME"]


def test_the_record_names_the_source_and_refuses_a_changed_one(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))
    src = make_file(tmp_path / "a.bin", 1000)
    base = putresume.record_base(str(src), parse_url("ftp://u:p@h:21/x/a.bin"))
    assert base.startswith(str(tmp_path / "drsftp" / "puts"))
    assert base != putresume.record_base(str(src), parse_url("ftp://u:p@h:21/x/b.bin"))
    assert putresume.held_on_server(base, 1000, "1") is None  # no record
    putresume.save(base, 1000, "1", RangeSet([(0, 300), (600, 700)]))
    assert putresume.held_on_server(base, 1000, "1") == RangeSet([(0, 300), (600, 700)])
    assert putresume.held_on_server(base, 1000, "2").total == 0  # the source changed: start over
    assert putresume.held_on_server(base, 999, "1").total == 0
    putresume.drop(base)
    assert putresume.held_on_server(base, 1000, "1") is None


def test_the_block_queue_holds_only_the_missing_ranges():
    q = BlockQueue(RangeSet([(0, 300), (600, 700)]).missing(1000), 128)
    assert q.join()
    blocks = []
    while (b := q.next()) is not None:
        blocks.append(b)
    assert blocks == [(300, 128), (428, 128), (556, 44), (700, 128), (828, 128), (956, 44)]


def test_continue_sends_only_what_the_server_lacks(tmp_path):
    """The server's .part holds two ranges (as an interrupted put left it)
    and the record says so: --continue sends REST with them and the rest."""
    root = tmp_path / "srv"
    root.mkdir()
    src = make_file(tmp_path / "up.bin", 8 * MiB + 11, seed=7)
    data = src.read_bytes()
    held = RangeSet([(0, 2 * MiB), (5 * MiB, 6 * MiB + 3)])
    with open(root / ".up.bin.part", "wb") as f:
        for a, b in held:
            f.seek(a)
            f.write(data[a:b])  # the held ranges as the server wrote them: a resend would overlap (451)
    with running_server(root) as srv:
        url = srv.url("up.bin")
        state = tmp_path / "state"
        base = _record(src, url, state)
        os.makedirs(os.path.dirname(base))
        putresume.save(base, len(data), str(os.stat(src).st_mtime_ns), held)
        env = {**os.environ, "XDG_STATE_HOME": str(state)}
        r = drsftp("put", "-P", "4", "--continue", str(src), url, "--json", str(tmp_path / "p.json"), env=env)
        assert r.returncode == 0, r.stderr
    p = json.loads((tmp_path / "p.json").read_text())
    assert p["mode"] == "E" and p["resumed_from"] == held.total
    assert p["bytes"] == len(data) - held.total
    assert sha256_file(root / "up.bin") == sha256_file(src)
    assert not (root / ".up.bin.part").exists()
    assert not os.path.exists(base + ".ranges")  # complete: the record is gone


def test_rest_ranges_the_partial_upload_does_not_reach_are_refused(tmp_path):
    """A record that outlived the server's .part must not make the server
    take a file of holes as whole."""
    from test_eblock_server import Ctl

    root = tmp_path / "srv"
    root.mkdir()
    (root / ".gone.bin.part").write_bytes(b"x" * 100)
    with running_server(root) as srv:
        ctl = Ctl(srv.port)
        assert ctl.cmd("MODE E")[0] == "200"
        ctl.pasv()
        assert ctl.cmd("REST 0-500")[0] == "350"
        code, text = ctl.cmd("STOR other.bin")
        assert code == "554", text
        assert ctl.cmd("REST 0-500")[0] == "350"
        code, text = ctl.cmd("STOR gone.bin")
        assert code == "554", text  # 100 bytes held, not 500
        assert ctl.cmd("REST 0-100")[0] == "350"
        assert ctl.cmd("STOR gone.bin")[0] == "150"  # what it holds: resumed
        ctl.close()
    assert not (root / "other.bin").exists() and not (root / ".other.bin.part").exists()


@pytest.mark.root
def test_a_killed_parallel_put_resumes_the_missing_ranges_only(tmp_path):
    """Kill the client mid-upload (rate-capped link); --continue finishes
    it from the server's last range marker, byte-identical, sending less."""
    from drsftp.netem.link import Link

    if os.geteuid() != 0:
        pytest.fail("needs root and network namespaces (CI runs as root)")
    root = tmp_path / "srv"
    root.mkdir()
    src = make_file(tmp_path / "big.bin", 32 * MiB + 5, seed=9)
    state = tmp_path / "state"
    env = {**os.environ, "XDG_STATE_HOME": str(state)}
    with Link(rtt=0.01, rate=50e6) as link, \
            running_server(root, "--host", link.server_addr, ns_prefix=link.command("server", [])) as srv:
        url = f"ftp://{USER}:{PASSWORD}@{link.server_addr}:{srv.port}/big.bin"
        record = _record(src, url, state) + ".ranges"
        put = [sys.executable, "-m", "drsftp", "put", "-P", "4", str(src), url]
        first = link.popen("client", put, env=env)
        try:
            assert wait_until(lambda: os.path.exists(record), timeout=30, step=0.05), "no range marker recorded"
            first.send_signal(signal.SIGKILL)  # mid-transfer, by PID
            first.wait(10)
        finally:
            if first.poll() is None:
                first.kill()
                first.wait()
        with open(record) as f:
            held = json.load(f)["ranges"]
        assert held and sum(b - a for a, b in held) < os.path.getsize(src)
        assert not (root / "big.bin").exists() and (root / ".big.bin.part").exists()
        r = link.run("client", [*put, "--continue", "--json", str(tmp_path / "p.json")], env=env, timeout=120)
        assert r.returncode == 0, r.stderr
    p = json.loads((tmp_path / "p.json").read_text())
    assert p["mode"] == "E" and p["resumed_from"] == sum(b - a for a, b in held) > 0
    assert p["bytes"] == os.path.getsize(src) - p["resumed_from"] < os.path.getsize(src)
    assert sha256_file(root / "big.bin") == sha256_file(src)
    assert not os.path.exists(record)


def test_continue_to_gridftp_sends_only_what_it_lacks(request, tmp_path):
    """globus-gridftp-server writes the file in place and takes REST
    ranges before STOR (GFD.20): the resumed put sends only the gaps."""
    d_, port = request.getfixturevalue("gridftp")
    src = make_file(tmp_path / "g.bin", 6 * MiB + 999, seed=11)
    data = src.read_bytes()
    held = RangeSet([(0, 1 * MiB), (3 * MiB, 4 * MiB + 17)])
    dest = os.path.join(d_, "g.bin")
    with open(dest, "wb") as f:
        for a, b in held:
            f.seek(a)
            f.write(data[a:b])
    os.chmod(dest, 0o666)
    url = f"ftp://127.0.0.1:{port}{dest}"
    state = tmp_path / "state"
    base = _record(src, url, state)
    os.makedirs(os.path.dirname(base))
    putresume.save(base, len(data), str(os.stat(src).st_mtime_ns), held)
    env = {**os.environ, "XDG_STATE_HOME": str(state)}
    r = drsftp("put", "-P", "4", "--continue", str(src), url, "--json", str(tmp_path / "p.json"), env=env)
    assert r.returncode == 0, r.stderr
    p = json.loads((tmp_path / "p.json").read_text())
    assert p["mode"] == "E" and p["resumed_from"] == held.total and p["bytes"] == len(data) - held.total
    assert sha256_file(dest) == sha256_file(src)
    assert not os.path.exists(base + ".ranges")
