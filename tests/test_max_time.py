"""--max-time, as curl's: one instant from the command's start, on every
path (one stream, -P N in MODE E, ranged sessions, trees); when it comes
the transfer stops, keeps what arrived and exits 28 (client/transfer/maxtime.py)."""

import json
import os
import socket
import sys

import pytest
from conftest import PASSWORD, USER, drsftp, make_file, running_server, sha256_file
from dataset_util import assert_same_tree

MiB = 1 << 20


@pytest.fixture
def served(tmp_path):
    """Files moved whole in a few ms on loopback: a stop checked every
    0.25 s came after them."""
    root = tmp_path / "srv"
    (root / "tree").mkdir(parents=True)
    (tmp_path / "tree").mkdir()
    make_file(root / "f.bin", 16 * MiB, seed=1)
    make_file(tmp_path / "up.bin", 16 * MiB, seed=2)
    for i in range(3):
        make_file(root / "tree" / f"t{i}.bin", MiB, seed=3 + i)
        make_file(tmp_path / "tree" / f"u{i}.bin", MiB, seed=6 + i)
    with running_server(root) as srv:
        yield srv, root


@pytest.mark.parametrize("args", [
    ("get", "{url}f.bin", "{tmp}/f.bin"),
    ("get", "-P", "4", "{url}f.bin", "{tmp}/f.bin"),  # MODE E
    ("put", "{tmp}/up.bin", "{url}up.bin"),
    ("put", "-P", "4", "{tmp}/up.bin", "{url}up.bin"),
    ("get", "-r", "{url}tree/", "{tmp}/gtree"),
    ("put", "-r", "{tmp}/tree/", "{url}uptree"),
], ids=["get", "get-P4", "put", "put-P4", "get-r", "put-r"])
def test_a_deadline_before_the_data_stops_every_path(served, tmp_path, args):
    srv, root = served
    url = f"ftp://{USER}:{PASSWORD}@127.0.0.1:{srv.port}/"
    r = drsftp(*(a.format(url=url, tmp=tmp_path) for a in args), "--max-time", "0.001")
    assert r.returncode == 28, r.stderr
    assert r.stderr.splitlines()[-1] == "drsftp: stopped after --max-time 0.001 s; --continue resumes"
    assert not (tmp_path / "f.bin").exists() and not (root / "up.bin").exists()
    assert not (tmp_path / "gtree" / "t0.bin").exists() and not (root / "uptree" / "u0.bin").exists()


@pytest.mark.parametrize("args", [
    ("get", "{url}f.bin", "{tmp}/f.bin"),
    ("get", "-P", "4", "{url}f.bin", "{tmp}/f.bin"),
    ("put", "{tmp}/up.bin", "{url}up.bin"),
    ("get", "-r", "{url}tree/", "{tmp}/gtree"),
], ids=["get", "get-P4", "put", "get-r"])
def test_the_deadline_counts_from_the_start_not_from_the_first_byte(tmp_path, args):
    """A server that never greets: the command stops at --max-time (exit
    28), not after the greeting's own timeout."""
    make_file(tmp_path / "up.bin", 1000)
    with socket.create_server(("127.0.0.1", 0)) as silent:  # (the kernel completes the handshake)
        url = f"ftp://{USER}:{PASSWORD}@127.0.0.1:{silent.getsockname()[1]}/"
        r = drsftp(*(a.format(url=url, tmp=tmp_path) for a in args), "--max-time", "0.5", timeout=60)
    assert r.returncode == 28, r.stderr
    assert r.stderr.splitlines()[-1] == "drsftp: stopped after --max-time 0.5 s; --continue resumes"


def test_a_deadline_stops_ranged_sessions(stock_server, tmp_path):
    """A server without extended block mode: -P 4 runs sessions on byte ranges."""
    root, port = stock_server
    make_file(root / "f.bin", 16 * MiB, seed=1)
    r = drsftp("get", "-P", "4", "--max-time", "0.001", f"ftp://{USER}:{PASSWORD}@127.0.0.1:{port}/f.bin",
               str(tmp_path / "f.bin"))
    assert r.returncode == 28, r.stderr
    assert not (tmp_path / "f.bin").exists()


def _linked(root):
    """A 50 Mbit/s, 10 ms link (drsftp netem) and a server on its far side:
    32 MiB take about 5 s, so a stop at 2 s comes in the data phase."""
    from drsftp.netem.link import Link

    link = Link(rtt=0.01, rate=50e6).up()
    try:
        srv = running_server(root, "--host", link.server_addr, ns_prefix=link.command("server", []))
        return link, srv
    except BaseException:
        link.close()
        raise


@pytest.mark.root
@pytest.mark.parametrize("streams", ["1", "4"])
@pytest.mark.parametrize("direction", ["get", "put"])
def test_a_transfer_stopped_mid_data_keeps_what_arrived_and_continues(tmp_path, direction, streams):
    root = tmp_path / "srv"
    root.mkdir()
    src = make_file((root if direction == "get" else tmp_path) / "big.bin", 32 * MiB, seed=11)
    digest = sha256_file(src)
    local = tmp_path / "big.bin"
    got = local if direction == "get" else root / "big.bin"
    part = tmp_path / "big.bin.part" if direction == "get" else root / ".big.bin.part"
    env = {**os.environ, "XDG_STATE_HOME": str(tmp_path / "state")}
    link, server = _linked(root)
    try:
        with server as srv:
            url = f"ftp://{USER}:{PASSWORD}@{link.server_addr}:{srv.port}/big.bin"
            ends = [url, str(local)] if direction == "get" else [str(local), url]

            def run(*extra):
                argv = [sys.executable, "-m", "drsftp", direction, "-P", streams, *extra, *ends,
                        "--json", str(tmp_path / "r.json")]
                return link.run("client", argv, env=env, timeout=120)

            r = run("--max-time", "2")
            assert r.returncode == 28, r.stderr
            first = json.loads((tmp_path / "r.json").read_text())
            assert not first["complete"] and 0 < first["bytes"] < 32 * MiB  # stopped in its data phase
            assert not got.exists() and part.exists()
            r = run("--continue")
            assert r.returncode == 0, r.stderr
    finally:
        link.close()
    assert sha256_file(got) == digest
    if (direction, streams) != ("put", "4"):  # (a MODE E put resumes what the server's markers reported)
        assert json.loads((tmp_path / "r.json").read_text())["resumed_from"] > 0


@pytest.mark.root
def test_a_tree_stopped_mid_data_reports_and_continues(tmp_path):
    root = tmp_path / "srv"
    (root / "tree").mkdir(parents=True)
    make_file(root / "tree" / "big.bin", 32 * MiB, seed=12)
    for i in range(3):
        make_file(root / "tree" / f"s{i}.bin", 1000 + i, seed=i)
    out = tmp_path / "out"
    link, server = _linked(root)
    try:
        with server as srv:
            url = f"ftp://{USER}:{PASSWORD}@{link.server_addr}:{srv.port}/tree/"

            def run(*extra):
                return link.run("client", [sys.executable, "-m", "drsftp", "get", "-r", *extra, url, str(out)],
                                timeout=120)

            r = run("--max-time", "2", "--json", str(tmp_path / "j.json"))
            assert r.returncode == 28, r.stderr
            assert json.loads((tmp_path / "j.json").read_text())["stopped"] is True
            lines = r.stderr.splitlines()
            assert lines[0].startswith("get: ") and lines[-1] == (
                "drsftp: stopped after --max-time 2 s; --continue resumes")
            assert not (out / "big.bin").exists() and (out / "big.bin.part").exists()
            r = run("--sync", "--continue")
            assert r.returncode == 0, r.stderr
    finally:
        link.close()
    assert_same_tree(root / "tree", out)
