"""`drsftp get/put -P 4` against real peers, on loopback: the ranged
stream-mode fallback against stock pyftpdlib and vsftpd, extended block mode
against globus-gridftp-server; resume of only the missing ranges.  Every
file byte-identical.  A missing peer program fails the test."""

import contextlib
import itertools
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile

import pytest
from conftest import PASSWORD, PY, USER, drsftp, make_file, sha256_file, wait_until

from drsftp.netem.link import stop_process

GRIDFTP = "/usr/sbin/globus-gridftp-server"
VSFTPD = "/usr/sbin/vsftpd"
MiB = 1 << 20
SIZE = 24 * MiB + 12345  # not a multiple of any block or range size


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def _world_dir():
    """A directory GridFTP's anonymous user (nobody) can read and write
    (pytest's tmp_path sits under a 0700 directory)."""
    d = tempfile.mkdtemp(prefix="drs-par-", dir="/tmp")
    os.chmod(d, 0o777)
    try:
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def gridftp():
    """globus-gridftp-server, anonymous as nobody, on loopback: (dir, port)."""
    with gridftp_server() as peer:
        yield peer


@contextlib.contextmanager
def gridftp_server(data_interface: str = "127.0.0.1"):
    """globus-gridftp-server, anonymous as nobody, control on 127.0.0.1 and
    data on ``data_interface``, serving the whole file system (URLs name
    files by their absolute path): (a fresh world-writable dir, port).
    Stopped by its PID after the block."""
    assert os.path.exists(GRIDFTP), f"{GRIDFTP} is missing (Debian: globus-gridftp-server-progs)"
    with _world_dir() as d:
        proc = subprocess.Popen([GRIDFTP, "-aa", "-anonymous-user", "nobody", "-p", "0",
                                 "-control-interface", "127.0.0.1", "-data-interface", data_interface,
                                 "-fork", "-no-chdir", "-d", "error"],
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        try:
            m = re.search(r"listening at [^:]+:(\d+)", proc.stdout.readline())
            assert m, "globus-gridftp-server did not start"
            yield d, int(m.group(1))
        finally:
            stop_process(proc, 10)


@contextlib.contextmanager
def _vsftpd(tmp_path, *extra):
    """vsftpd, anonymous, as this user, on loopback: (dir, port).  It does
    not chroot: URLs name files by their absolute path."""
    assert os.path.exists(VSFTPD), f"{VSFTPD} is missing (Debian: vsftpd)"
    root, empty = tmp_path / "vs", tmp_path / "vs-empty"
    root.mkdir()
    empty.mkdir()
    port = _free_port()
    conf = tmp_path / "vsftpd.conf"
    conf.write_text("\n".join([
        "listen=YES", "listen_ipv6=NO", "listen_address=127.0.0.1", f"listen_port={port}", "background=NO",
        "run_as_launching_user=YES", "anonymous_enable=YES", "local_enable=NO", "no_anon_password=YES",
        f"anon_root={root}", f"secure_chroot_dir={empty}", "seccomp_sandbox=NO", "pasv_enable=YES",
        "connect_from_port_20=NO", "xferlog_enable=NO", "vsftpd_log_file=/dev/null", "dual_log_enable=NO",
        "syslog_enable=NO", *extra, ""]))
    proc = subprocess.Popen([VSFTPD, str(conf)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        assert wait_until(lambda: _listening(port), 10), "vsftpd did not start"
        yield root, port
    finally:
        stop_process(proc, 10)


@pytest.fixture
def vsftpd(tmp_path):
    with _vsftpd(tmp_path) as v:
        yield v


def _listening(port):
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
        return True
    except OSError:
        return False


THROTTLED = """
import sys
from pyftpdlib.authorizers import DummyAuthorizer
from pyftpdlib.handlers import FTPHandler, ThrottledDTPHandler
from pyftpdlib.servers import FTPServer
root, rate, user, password = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
class DTP(ThrottledDTPHandler):
    write_limit = rate
class Handler(FTPHandler):
    dtp_handler = DTP
    authorizer = DummyAuthorizer()
Handler.authorizer.add_user(user, password, root, perm="elr")
server = FTPServer(("127.0.0.1", 0), Handler)
print("port", server.socket.getsockname()[1], flush=True)
server.serve_forever()
"""


@pytest.fixture
def throttled_server(tmp_path):
    """Stock pyftpdlib sending at most 2 MB/s per data connection: (root, port)."""
    root = tmp_path / "slow"
    root.mkdir()
    proc = subprocess.Popen([PY, "-c", THROTTLED, str(root), str(2_000_000), USER, PASSWORD],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        m = re.match(r"port (\d+)", proc.stdout.readline())
        assert m, "throttled pyftpdlib did not start"
        yield root, int(m.group(1))
    finally:
        stop_process(proc, 10)


def _get(url, dest, *extra, parallel="4"):
    out = dest + ".json"
    r = drsftp("get", "-P", parallel, url, dest, "--json", out, "--progress", "never", *extra, timeout=120)
    assert r.returncode == 0, r.stderr
    with open(out) as f:
        return json.load(f), r


def _check_streams(d, size, mode, streams=4):
    """``streams`` connections were opened and their bytes add up to the
    file.  A ranged session is given a range of its own; in MODE E any
    block may go on any stream (GFD.20), so one that connected after the
    others took the last blocks may carry none."""
    assert d["mode"] == mode and d["streams"] == len(d["per_stream"]) == streams, d["per_stream"]
    assert sum(s["bytes"] for s in d["per_stream"]) == d["bytes"] == size
    if mode == "ranged":
        assert all(s["bytes"] > 0 for s in d["per_stream"]), d["per_stream"]


def auto_streams(d):
    """-P auto's connections: the streams it started with, one more per
    increase in its record of changes (a decrease retires one)."""
    counts = [d["streams_start"]] + [c["streams"] for c in d["stream_changes"]]
    return d["streams_start"] + sum(1 for a, b in itertools.pairwise(counts) if b > a)


def test_ranged_get_from_stock_pyftpdlib(stock_server, tmp_path):
    root, port = stock_server
    src = make_file(root / "f.bin", SIZE, seed=3)
    dest = str(tmp_path / "out.bin")
    d, _ = _get(f"ftp://{USER}:{PASSWORD}@127.0.0.1:{port}/f.bin", dest)
    _check_streams(d, SIZE, "ranged")
    assert sha256_file(dest) == sha256_file(src)
    assert not os.path.exists(dest + ".part") and not os.path.exists(dest + ".part.ranges")


def test_ranged_get_from_vsftpd(vsftpd, tmp_path):
    root, port = vsftpd
    src = make_file(root / "f.bin", SIZE, seed=4)
    dest = str(tmp_path / "out.bin")
    d, _ = _get(f"ftp://127.0.0.1:{port}{src}", dest)
    _check_streams(d, SIZE, "ranged")
    assert sha256_file(dest) == sha256_file(src)


def test_ranged_get_with_fewer_sessions_than_asked(tmp_path):
    """vsftpd allows 2 sessions per address (max_per_ip): -P 4 runs on 2."""
    with _vsftpd(tmp_path, "max_per_ip=2") as (root, port):
        src = make_file(root / "f.bin", SIZE, seed=13)
        dest = str(tmp_path / "out.bin")
        d, r = _get(f"ftp://127.0.0.1:{port}{src}", dest)
    assert d["mode"] == "ranged" and d["streams"] == 2 and d["bytes"] == SIZE
    assert r.stderr.count("refused another session") == 1
    assert sha256_file(dest) == sha256_file(src)


def test_auto_get_from_stock_pyftpdlib(stock_server, tmp_path):
    root, port = stock_server
    src = make_file(root / "f.bin", SIZE, seed=5)
    dest = str(tmp_path / "out.bin")
    r = drsftp("get", "-P", "auto", f"ftp://{USER}:{PASSWORD}@127.0.0.1:{port}/f.bin", dest,
               "--json", dest + ".json", "--progress", "never", timeout=120)
    assert r.returncode == 0, r.stderr
    with open(dest + ".json") as f:
        d = json.load(f)
    # ranged sessions: those it started with and those it added, but for
    # one added too late to find a range (it shows no row)
    assert d["parallel"] == "auto" and d["mode"] == "ranged" and d["bytes"] == SIZE
    assert d["streams_start"] <= d["streams"] == len(d["per_stream"]) <= auto_streams(d), d
    assert sum(s["bytes"] for s in d["per_stream"]) == SIZE
    assert sha256_file(dest) == sha256_file(src)


def test_put_P_against_a_stream_mode_server_runs_one_stream(stock_server, tmp_path):
    root, port = stock_server
    src = make_file(tmp_path / "up.bin", SIZE, seed=6)
    r = drsftp("-v", "put", "-P", "4", str(src), f"ftp://{USER}:{PASSWORD}@127.0.0.1:{port}/up.bin",
               "--progress", "never", timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stderr.count("no safe parallel upload") == 1
    assert sha256_file(root / "up.bin") == sha256_file(src)


def test_mode_e_get_from_gridftp_verified(gridftp, tmp_path):
    d_, port = gridftp
    src = make_file(os.path.join(d_, "f.bin"), SIZE, seed=7)
    os.chmod(src, 0o644)
    dest = str(tmp_path / "out.bin")
    d, _ = _get(f"ftp://127.0.0.1:{port}{src}", dest, "--verify")
    _check_streams(d, SIZE, "E")
    assert d["sha256"] == sha256_file(src) == sha256_file(dest)  # CKSM SHA256 agreed


def test_mode_e_put_to_gridftp(gridftp, tmp_path):
    d_, port = gridftp
    src = make_file(tmp_path / "up.bin", SIZE, seed=8)
    r = drsftp("put", "-P", "4", str(src), f"ftp://127.0.0.1:{port}{d_}/up.bin", "--json",
               str(tmp_path / "up.json"), "--progress", "never", "--verify", timeout=120)
    assert r.returncode == 0, r.stderr
    with open(tmp_path / "up.json") as f:
        d = json.load(f)
    _check_streams(d, SIZE, "E")
    assert sha256_file(os.path.join(d_, "up.bin")) == sha256_file(src) == d["sha256"]


def test_mode_e_empty_file_both_ways(gridftp, tmp_path):
    d_, port = gridftp
    empty = tmp_path / "empty.bin"
    empty.write_bytes(b"")
    r = drsftp("put", "-P", "4", str(empty), f"ftp://127.0.0.1:{port}{d_}/e.bin", "--progress", "never")
    assert r.returncode == 0, r.stderr
    assert os.path.getsize(os.path.join(d_, "e.bin")) == 0
    r = drsftp("get", "-P", "4", f"ftp://127.0.0.1:{port}{d_}/e.bin", str(tmp_path / "e.out"),
               "--progress", "never")
    assert r.returncode == 0, r.stderr
    assert os.path.getsize(tmp_path / "e.out") == 0


@pytest.mark.parametrize("parallel", ["4", "auto"])
def test_mode_e_get_and_put_with_drsftp_serve(server, tmp_path, parallel):
    src = make_file(tmp_path / "up.bin", SIZE, seed=12)
    out = str(tmp_path / "put.json")
    r = drsftp("put", "-P", parallel, str(src), server.url("up.bin"), "--json", out, "--progress", "never",
               "--verify", timeout=120)
    assert r.returncode == 0, r.stderr
    with open(out) as f:
        d = json.load(f)
    assert d["drs_peer"] and d["sha256"] == sha256_file(src)
    _check_streams(d, SIZE, "E", 4 if parallel == "4" else auto_streams(d))
    dest = str(tmp_path / "back.bin")
    d, _ = _get(server.url("up.bin"), dest, "--verify", parallel=parallel)
    _check_streams(d, SIZE, "E", 4 if parallel == "4" else auto_streams(d))
    assert sha256_file(dest) == sha256_file(src) == d["sha256"]


def test_a_put_too_short_for_a_streams_tick_still_exchanges_drs(server, tmp_path):
    """The first DRS goes with the STOR, before any stream carries a byte:
    a put over before any stream's first tick still learns that the server
    speaks DRS (docs/PROTOCOL.md, "DRS in extended block mode")."""
    src = make_file(tmp_path / "small.bin", 256 << 10, seed=13)
    for i in range(3):
        out = str(tmp_path / f"small{i}.json")
        r = drsftp("put", "-P", "4", str(src), server.url(f"small{i}.bin"), "--json", out, "--progress", "never")
        assert r.returncode == 0, r.stderr
        with open(out) as f:
            d = json.load(f)
        assert d["mode"] == "E" and d["drs_peer"] and d["drs_replies"] >= 1, d
        assert sha256_file(os.path.join(server.root, f"small{i}.bin")) == sha256_file(src)


HELD = [(0, 5_000_000), (10_000_000, 12_000_000), (SIZE - 1_000_000, SIZE)]


def _partial(dest, src, held, size=SIZE):
    """A .part holding ``held`` of ``src`` (other bytes wrong) and its record."""
    with open(src, "rb") as f:
        data = f.read()
    buf = bytearray(b"\xee" * len(data))
    for a, b in held:
        buf[a:b] = data[a:b]
    with open(dest + ".part", "wb") as f:
        f.write(buf)
    with open(dest + ".part.ranges", "w") as f:
        json.dump({"size": size, "mtime": None, "ranges": [list(r) for r in held]}, f)


@pytest.mark.parametrize("peer", ["gridftp", "stock", "drsftp"])
def test_continue_fetches_only_the_missing_ranges(peer, request, tmp_path):
    if peer == "drsftp":
        srv = request.getfixturevalue("server")
        src = make_file(os.path.join(srv.root, "f.bin"), SIZE, seed=9)
        url, mode = srv.url("f.bin"), "E"
    elif peer == "gridftp":
        d_, port = request.getfixturevalue("gridftp")
        src = make_file(os.path.join(d_, "f.bin"), SIZE, seed=9)
        os.chmod(src, 0o644)
        url, mode = f"ftp://127.0.0.1:{port}{src}", "E"
    else:
        root, port = request.getfixturevalue("stock_server")
        src = make_file(root / "f.bin", SIZE, seed=9)
        url, mode = f"ftp://{USER}:{PASSWORD}@127.0.0.1:{port}/f.bin", "ranged"
    dest = str(tmp_path / "out.bin")
    _partial(dest, src, HELD)
    held = sum(b - a for a, b in HELD)
    d, _ = _get(url, dest, "--continue")
    assert d["mode"] == mode and d["resumed_from"] == held and d["bytes"] == SIZE - held
    assert sha256_file(dest) == sha256_file(src)
    # a record of another file (size differs): everything again
    _partial(dest, src, HELD, size=SIZE + 1)
    os.unlink(dest)
    d, _ = _get(url, dest, "--continue")
    assert d["resumed_from"] == 0 and d["bytes"] == SIZE
    assert sha256_file(dest) == sha256_file(src)


def test_interrupted_get_continues_with_the_gaps(throttled_server, tmp_path):
    root, port = throttled_server
    size = 16 * MiB
    src = make_file(root / "f.bin", size, seed=10)
    url = f"ftp://{USER}:{PASSWORD}@127.0.0.1:{port}/f.bin"
    dest = str(tmp_path / "out.bin")
    record = dest + ".part.ranges"
    proc = subprocess.Popen([PY, "-m", "drsftp", "get", "-P", "4", url, dest, "--progress", "never"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        # 4 streams at 2 MB/s: ~2 s for the file; stop once 3 MB are recorded
        assert wait_until(lambda: _held(record) >= 3_000_000, 30, 0.05), "no progress recorded"
        proc.send_signal(signal.SIGINT)
        assert proc.wait(30) == 130, proc.stderr.read()
    finally:
        stop_process(proc, 10)
    first = _held(record)
    with open(record) as f:
        ranges = json.load(f)["ranges"]
    assert 3_000_000 <= first < size and len(ranges) >= 2  # held: several ranges, gaps between
    d, _ = _get(url, dest, "--continue")
    assert d["resumed_from"] == first and d["bytes"] == size - first
    assert sha256_file(dest) == sha256_file(src)
    assert not os.path.exists(record)


def _held(record):
    try:
        with open(record) as f:
            return sum(b - a for a, b in json.load(f)["ranges"])
    except (OSError, ValueError):
        return 0


def test_bad_parallel_argument_is_one_line():
    r = drsftp("get", "-P", "99", "ftp://127.0.0.1:1/x", "/tmp/never")
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert r.stderr.strip().count("\n") == 0 and "1 to 64" in r.stderr

