"""End to end on loopback with a real `drsftp serve` process."""

import itertools
import json
import os
from pathlib import Path

import pytest
from conftest import (
    drsftp,
    ftp_session,
    link_file,
    make_file,
    reply_of,
    sha256_file,
    start_stalled_retr,
)


def test_get_and_put_256mib_identical(server, big_file, tmp_path):
    src, digest = big_file
    link_file(src, server.root)
    dest = tmp_path / "got.bin"
    r = drsftp("get", server.url("big.bin"), str(dest), "--json", str(tmp_path / "get.json"))
    assert r.returncode == 0, r.stderr
    assert sha256_file(dest) == digest
    assert not os.path.exists(str(dest) + ".part")
    report = json.loads((tmp_path / "get.json").read_text())
    assert report["bytes"] == report["total_size"] == 256 << 20 and report["complete"] is True
    assert report["drs_peer"] is True and report["drs_replies"] >= 1
    # the rate is the bytes over the seconds (seconds rounded to 0.1 ms)
    assert report["mbps"] == pytest.approx(8 * report["bytes"] / report["seconds"] / 1e6, rel=0.01)
    assert 0 < report["rtt_min_ms"] <= report["rtt_avg_ms"] <= report["rtt_max_ms"]
    assert isinstance(report["retransmits"], int) and report["retransmits"] >= 0
    # SO_RCVBUF reads twice what was set (at most rmem_max), autotuning stops at tcp_rmem's max
    rmem_max = int(Path("/proc/sys/net/core/rmem_max").read_text())
    tcp_rmem_max = int(Path("/proc/sys/net/ipv4/tcp_rmem").read_text().split()[2])
    assert 256 << 10 <= report["peak_rcvbuf"] <= max(2 * rmem_max, tcp_rmem_max)
    timeline = report["timeline"]
    assert timeline and {"t", "rate_bps", "rtt_ms", "window", "rcvbuf"} <= set(timeline[0])
    assert all(a["t"] < b["t"] and a["bytes"] <= b["bytes"] for a, b in itertools.pairwise(timeline))
    assert timeline[-1]["bytes"] <= (256 << 20) + 1  # TCP's count: the FIN takes a sequence number
    # DRS's window stays within its floor (256 KiB) and the default cap (64 MiB)
    assert all(256 << 10 <= s["window"] <= 64 << 20 for s in timeline if s["window"])

    r = drsftp("put", str(dest), server.url("up.bin"), "--json", str(tmp_path / "put.json"))
    assert r.returncode == 0, r.stderr
    assert sha256_file(os.path.join(server.root, "up.bin")) == digest
    assert json.loads((tmp_path / "put.json").read_text())["bytes"] == 256 << 20


def test_continue_resumes_an_interrupted_get(server, tmp_path):
    src = make_file(os.path.join(server.root, "f.bin"), 40 << 20, seed=2)
    dest = tmp_path / "f.bin"
    # what an interrupted get leaves: the first part, under DEST.part
    with open(src, "rb") as fin, open(str(dest) + ".part", "wb") as fout:
        fout.write(fin.read(13_000_001))
    r = drsftp("get", server.url("f.bin"), str(dest), "--continue", "--json", str(tmp_path / "j"))
    assert r.returncode == 0, r.stderr
    assert sha256_file(dest) == sha256_file(src)
    report = json.loads((tmp_path / "j").read_text())
    assert report["resumed_from"] == 13_000_001
    assert report["bytes"] == (40 << 20) - 13_000_001
    # already complete: nothing moves
    r = drsftp("get", server.url("f.bin"), str(dest), "--continue", "--json", str(tmp_path / "j2"))
    assert r.returncode == 0 and json.loads((tmp_path / "j2").read_text())["bytes"] == 0


def test_continue_resumes_an_interrupted_put(server, tmp_path):
    src = make_file(tmp_path / "u.bin", 30 << 20, seed=3)
    with open(src, "rb") as fin, open(os.path.join(server.root, "u.bin"), "wb") as fout:
        fout.write(fin.read(7_777_777))
    r = drsftp("put", str(src), server.url("u.bin"), "--continue", "--json", str(tmp_path / "j"))
    assert r.returncode == 0, r.stderr
    assert sha256_file(os.path.join(server.root, "u.bin")) == sha256_file(src)
    assert json.loads((tmp_path / "j").read_text())["resumed_from"] == 7_777_777


def test_drs_mid_transfer_live_numbers_and_guarded_commands(server, tmp_path):
    src = make_file(os.path.join(server.root, "g.bin"), 64 << 20, seed=4)
    ftp = ftp_session(server.port)
    assert reply_of(ftp, "DRS rtt_us=1000").startswith("425 DRS")  # no transfer yet
    data, head = start_stalled_retr(ftp, "g.bin", first=1 << 20)

    first = reply_of(ftp, "DRS rtt_us=1000 wnd=262144 rate=1000000 bytes=1048576")
    assert first.startswith("200 DRS "), first
    pairs = dict(kv.split("=") for kv in first.split()[2:])
    # the client has read 1 MiB; the ACK of its last segments may still be
    # delayed (RFC 9293 sec. 3.8.6.3), at most its 64 KiB window behind
    assert (1 << 20) - 65536 <= int(pairs["bytes"]) <= 64 << 20
    # in flight never exceeds the cwnd; the cwnd is at least RFC 6928's
    # initial window (10 x 1460 B); DRS's send buffer at least its floor
    # (256 KiB), which the kernel doubles (docs/DESIGN.md, kf-doubling)
    assert 0 <= int(pairs["inflight"]) <= int(pairs["cwnd"]) and int(pairs["cwnd"]) >= 14600
    assert int(pairs["sndbuf"]) >= 2 * (256 << 10)

    for cmd in ("PASV", "EPSV", "PORT 127,0,0,1,4,1", "EPRT |1|127.0.0.1|1025|", "RETR g.bin",
                "STOR other.bin", "APPE other.bin", "LIST", "NLST", "MLSD", "REST 0", "TYPE A"):
        assert reply_of(ftp, cmd).startswith("503"), cmd
    for bad in ("DRS rtt_us=-5", "DRS cwnd=abc", "DRS " + "x=1 " * 20, "DRS rtt_us=99999999999"):
        assert reply_of(ftp, bad).startswith("501 DRS"), bad
    assert reply_of(ftp, "NOOP").startswith("200")

    # read on, ask again: the numbers are live
    more = b""
    while len(more) < 8 << 20:
        more += data.recv(1 << 20)
    second = reply_of(ftp, "DRS")
    assert int(dict(kv.split("=") for kv in second.split()[2:])["bytes"]) > int(pairs["bytes"])

    rest = bytearray()
    while chunk := data.recv(1 << 20):
        rest += chunk
    data.close()
    assert ftp.voidresp().startswith("226")
    got = head + more + bytes(rest)
    with open(src, "rb") as f:
        assert got == f.read()  # the transfer is intact after all of the above
    ftp.quit()


def test_abor_stops_a_running_transfer(server):
    make_file(os.path.join(server.root, "a.bin"), 64 << 20, seed=5)
    ftp = ftp_session(server.port)
    data, _ = start_stalled_retr(ftp, "a.bin")
    ftp.putcmd("ABOR")
    replies = [ftp.getline()[:3], ftp.getline()[:3]]
    assert replies == ["426", "226"]
    data.close()
    assert ftp.sendcmd("PASV").startswith("227")  # no longer guarded
    ftp.quit()


def test_feat_and_help_advertise_drs(server):
    ftp = ftp_session(server.port)
    assert " DRS" in ftp.sendcmd("FEAT")
    assert "DRS" in ftp.sendcmd("HELP DRS")
    ftp.quit()
