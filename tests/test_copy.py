"""`drsftp copy` between two `drsftp serve` on 127.0.0.1 (different roots
and ports; docs/THIRDPARTY.md): byte-identical copies in stream mode and
extended block mode, -P auto from the data path, a tree on pairs of
sessions with --sync, --continue, --verify, --json with both servers'
DRS reports, the relayed DRS reaching both servers, TLS, and one local
side running get or put."""

from __future__ import annotations

import json
import os
import re

import pytest
from conftest import PASSWORD, PY, USER, ServerProcess, drsftp, make_file, running_server, sha256_file
from tlscerts import make_certs

HERE = os.path.dirname(os.path.abspath(__file__))
MiB = 1 << 20


@pytest.fixture
def pair(tmp_path, monkeypatch):
    """Two `drsftp serve`, source and destination, with their roots."""
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))  # MODE E resume records
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    with running_server(a) as sa, running_server(b) as sb:
        yield sa, sb


def slow_server(root, rate, *extra):
    """`drsftp serve`'s handlers sending at most ``rate`` B/s (tests/slowserve.py)."""
    return ServerProcess(root, cmd=[PY, os.path.join(HERE, "slowserve.py"), str(root), str(rate), USER, PASSWORD,
                                    *extra])


def copy(src, dst, *extra, timeout=120, env=None):
    return drsftp("copy", src, dst, "--progress", "never", *extra, timeout=timeout, env=env)


def load(path):
    with open(path) as f:
        return json.load(f)


def transfer_lines(srv):
    return [line for line in srv.stderr_text().splitlines() if " transfer " in line]


def test_stream_mode_copy_relays_each_servers_drs_to_the_other(tmp_path):
    """A slow source (3 MB/s, pyftpdlib's throttle) keeps the copy running
    long enough for many rounds; both servers log every command (-vv)."""
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    src = make_file(a / "f.bin", 6 * MiB + 7, seed=1)
    with running_server(b, "-vv") as sb:
        sa = slow_server(a, 3_000_000)
        try:
            out = tmp_path / "r.json"
            r = copy(sa.url("f.bin"), sb.url("sub-less.bin"), "--json", str(out))
            a_log = sa.stderr_text()
        finally:
            sa.stop()
        b_log = sb.stderr_text()
    assert r.returncode == 0, r.stderr
    assert sha256_file(b / "sub-less.bin") == sha256_file(src)
    d = load(out)
    assert d["direction"] == "copy" and d["mode"] == "S" and d["bytes"] == d["total_size"] == 6 * MiB + 7
    series = d["servers"]
    assert len(series["source"]) >= 3 and len(series["destination"]) >= 3
    assert all("cwnd" in row and "rtt_us" in row for row in series["source"])  # the sender's numbers
    assert all("wnd" in row and "rate" in row for row in series["destination"])  # the receiver's
    assert d["relayed"]["source"] >= 2 and d["relayed"]["destination"] >= 2 and d["drs_peer"]
    # what reached each server: DRS commands carrying the other's pairs (pyftpdlib's -vv command log)
    assert len(re.findall(r"<- DRS [^\n]*\bwnd=", a_log)) >= 2, a_log[-2000:]  # B's window, at A
    assert len(re.findall(r"<- DRS [^\n]*\bcwnd=", b_log)) >= 2, b_log[-2000:]  # A's congestion window, at B
    assert "drs_peer=yes" in b_log and "complete=yes" in b_log
    # the data-path RTT in the result is the servers' own (A's rtt_us), not a control connection's
    rtts = [row["rtt_us"] / 1000 for row in series["source"] if row.get("rtt_us")]
    assert d["rtt_min_ms"] == round(min(rtts), 3)
    assert "DRS relayed between the servers" in r.stderr


def test_extended_block_mode_with_four_streams(pair, tmp_path):
    sa, sb = pair
    src = make_file(os.path.join(sa.root, "f.bin"), 48 * MiB + 3, seed=2)
    out = tmp_path / "e.json"
    r = copy(sa.url("f.bin"), sb.url("e.bin"), "-P", "4", "--json", str(out))
    assert r.returncode == 0, r.stderr
    assert sha256_file(os.path.join(sb.root, "e.bin")) == sha256_file(src)
    d = load(out)
    assert d["mode"] == "E" and d["streams"] == 4 and d["parallel"] == 4
    assert "streams=4" in transfer_lines(sa)[-1] and "streams=4" in transfer_lines(sb)[-1]
    assert "4 streams (E)" in r.stderr


def test_p_auto_starts_at_four_and_moves_at_the_first_data_path_report(pair, tmp_path, big_file):
    from drsftp.client.thirdparty.single import window_cap
    from drsftp.tuning.count.streams import StreamsConfig, first_streams

    sa, sb = pair
    os.link(big_file[0], os.path.join(sa.root, "big.bin"))
    out = tmp_path / "auto.json"
    r = copy(sa.url("big.bin"), sb.url("big.bin"), "-P", "auto", "--json", str(out))
    assert r.returncode == 0, r.stderr
    assert sha256_file(os.path.join(sb.root, "big.bin")) == big_file[1]
    d = load(out)
    assert d["mode"] == "E" and d["parallel"] == "auto" and d["streams_start"] == 4
    first = d["data_rtt_first_ms"]
    # the first decision's RTT is one a server reported for its data sockets (the sender's, else the
    # receiver's estimate, whichever report came first)
    reported = [round(row["rtt_us"] / 1000, 3) for rows in d["servers"].values() for row in rows if row.get("rtt_us")]
    assert first in reported
    want = first_streams(first / 1000, window_cap(), StreamsConfig(max_streams=16))
    if want != 4:
        assert d["stream_changes"][0]["streams"] == want
    # the source's log counts every stream it connected (the first 4, one per increase)
    assert "streams=4" in transfer_lines(sa)[-1] or want > 4


def test_a_tree_on_pairs_of_sessions_then_sync_moves_nothing(pair, tmp_path):
    sa, sb = pair
    root = os.path.join(sa.root, "tree")
    for rel, size in [("a.bin", 300_001), ("d/b.bin", 2 * MiB), ("d/e/c.bin", 1), ("d/e/f/g.bin", 5 * MiB + 1)] + \
            [(f"m/{i}.dat", 10_000 * i + 1) for i in range(12)]:
        os.makedirs(os.path.dirname(os.path.join(root, rel)), exist_ok=True)
        make_file(os.path.join(root, rel), size, seed=size)
    os.makedirs(os.path.join(root, "empty"))
    out = tmp_path / "tree.json"
    r = copy(sa.url("tree/"), sb.url("copy/"), "-r", "-c", "3", "-P", "2", "--json", str(out), "-v")
    assert r.returncode == 0, r.stderr
    for dirpath, _dirs, files in os.walk(root):
        rel = os.path.relpath(dirpath, root)
        there = os.path.join(sb.root, "copy", rel)
        assert os.path.isdir(there)
        for name in files:
            assert sha256_file(os.path.join(there, name)) == sha256_file(os.path.join(dirpath, name)), name
    d = load(out)
    ok = [f for f in d["files"] if f["status"] == "ok"]
    assert len(ok) == 16 and d["sessions_max"] <= 3 and d["direction"] == "copy"
    assert all(f["mode"] == "E" and f["streams"] == 2 for f in ok)
    assert any(f["cached"] for f in ok)  # a pair's streams carried file after file
    logins = [line for line in sb.stderr_text().splitlines() if " login " in line]
    assert len(logins) <= 4  # the walk's and at most three pairs' (no session per file)
    r = copy(sa.url("tree/"), sb.url("copy/"), "-r", "--sync", "--json", str(out))
    assert r.returncode == 0, r.stderr
    d = load(out)
    assert {f["status"] for f in d["files"]} == {"skipped"} and len(d["files"]) == 16


def test_continue_moves_only_what_the_destination_lacks(pair, tmp_path):
    sa, sb = pair
    src = make_file(os.path.join(sa.root, "f.bin"), 9 * MiB + 5, seed=3)
    with open(src, "rb") as f:
        head = f.read(3 * MiB)
    with open(os.path.join(sb.root, ".g.bin.part"), "wb") as f:  # drsftp serve's part file (SECURITY.md)
        f.write(head)
    out = tmp_path / "c.json"
    r = copy(sa.url("f.bin"), sb.url("g.bin"), "--continue", "--json", str(out))
    assert r.returncode == 0, r.stderr
    assert sha256_file(os.path.join(sb.root, "g.bin")) == sha256_file(src)
    d = load(out)
    assert d["resumed_from"] == 3 * MiB and d["bytes"] == 6 * MiB + 5
    assert f"bytes={6 * MiB + 5} " in transfer_lines(sb)[-1] and f"bytes={6 * MiB + 5} " in transfer_lines(sa)[-1]
    r = copy(sa.url("f.bin"), sb.url("g.bin"), "--continue", "--json", str(out))
    assert r.returncode == 0 and load(out)["note"] == "already complete"


def test_verify_compares_both_servers_digests(pair, tmp_path):
    sa, sb = pair
    src = make_file(os.path.join(sa.root, "v.bin"), 2 * MiB + 1, seed=4)
    out = tmp_path / "v.json"
    r = copy(sa.url("v.bin"), sb.url("dir/"), "--verify", "--json", str(out))
    assert r.returncode != 0 and "dir" in r.stderr  # (no such directory on B: one sentence)
    assert len(r.stderr.strip().splitlines()) == 1
    os.mkdir(os.path.join(sb.root, "dir"))
    r = copy(sa.url("v.bin"), sb.url("dir/"), "--verify", "--json", str(out), "-P", "2")
    assert r.returncode == 0, r.stderr
    assert load(out)["sha256"] == sha256_file(src) == sha256_file(os.path.join(sb.root, "dir", "v.bin"))


@pytest.mark.alone  # (once, beside another worker's test: B answered STOR 425, no data connection)
def test_tls_protects_both_control_connections_and_the_data_between_the_servers(tmp_path):
    certs = make_certs(tmp_path / "certs")
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    src = make_file(a / "t.bin", 3 * MiB, seed=5)
    tls = ("--tls-cert", str(certs.good))
    with running_server(a, *tls) as sa, running_server(b, *tls) as sb:
        # PROT P on both: without SSCN ON on the source both servers would be TLS servers and the
        # data connection's handshake would fail
        r = copy(sa.url("t.bin"), sb.url("t.bin"), "--tls", "--ca-file", str(certs.ca))
        assert r.returncode == 0, r.stderr
        assert sha256_file(b / "t.bin") == sha256_file(src)
        r = copy(sa.url("t.bin"), sb.url("t2.bin"), "--tls", "--ca-file", str(certs.ca), "--tls-data", "clear")
        assert r.returncode == 0, r.stderr
        # a tree: the walk's listings in TLS to this client, each pair's data in TLS between the servers
        (a / "d").mkdir()
        make_file(a / "d" / "x.bin", 100_001, seed=7)
        r = copy(sa.url("d/"), sb.url("d/"), "-r", "--tls", "--ca-file", str(certs.ca))
        assert r.returncode == 0, r.stderr
        text = sa.stderr_text() + sb.stderr_text()
        logins = [line for line in text.splitlines() if " login " in line]
    assert sha256_file(b / "t2.bin") == sha256_file(src)
    assert sha256_file(b / "d" / "x.bin") == sha256_file(a / "d" / "x.bin")
    assert logins and all("tls=yes" in line for line in logins)


def test_one_local_side_is_get_or_put(pair, tmp_path):
    _sa, sb = pair
    src = make_file(tmp_path / "local.bin", MiB + 9, seed=6)
    out = tmp_path / "p.json"
    r = copy(str(src), sb.url("up.bin"), "--json", str(out))
    assert r.returncode == 0, r.stderr
    assert load(out)["direction"] == "put" and sha256_file(os.path.join(sb.root, "up.bin")) == sha256_file(src)
    r = copy(sb.url("up.bin"), str(tmp_path / "down.bin"), "--json", str(out))
    assert r.returncode == 0, r.stderr
    assert load(out)["direction"] == "get" and sha256_file(tmp_path / "down.bin") == sha256_file(src)


@pytest.mark.parametrize(("args", "says"), [
    (["a.bin", "b.bin"], "needs an ftp:// or ftps:// URL"),
    (["a.bin", "ftp://h:1/x", "--tls-data", "clear"], "--tls-data is for copies between two servers"),
    (["ftp://h:1/x", "ftp://h:1/x"], "SRC and DST are the same file"),
    (["ftp://h:1/x", "ftp://h:2/y", "-P", "0"], "-P/--parallel: 1 to 64 streams"),
])
def test_usage_errors_are_one_sentence(args, says):
    r = drsftp("copy", *args, timeout=30)
    assert r.returncode == 2 and says in r.stderr and r.stderr.count("\n") == 1, r.stderr
