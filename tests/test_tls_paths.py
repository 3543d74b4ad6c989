"""FTPS on the parallel and dataset paths, with real peers on loopback:
`get/put -P N --tls` (MODE E with TLS streams against drsftp serve, which
lists PARALLEL: tests/test_modee_tls.py has the details; ranged
stream-mode sessions against vsftpd, every session and data connection in
TLS), `get -r/put -r/ls --tls`, several sources, --sync and --continue,
against `drsftp serve --require-tls` and vsftpd (ssl_enable,
require_ssl_reuse: a data connection that does not resume its control
connection's TLS session is refused).  Missing programs fail the test."""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import subprocess

import pytest
from conftest import PASSWORD, PY, USER, ServerProcess, drsftp, make_file, sha256_file, wait_until
from dataset_util import assert_same_tree, job_records, make_tree
from test_parallel_peers import auto_streams
from test_tls import certs, vsftpd  # noqa: F401 (certs: a fixture)

from drsftp.client.streams import parallel, ranged
from drsftp.client.transfer import dataconn, streammode
from drsftp.client.transfer.getput import TransferOptions
from drsftp.client.trees import listings
from drsftp.client.trees.dataset import run_get, run_put
from drsftp.client.trees.job.treejob import JobOptions
from drsftp.ftp.url import parse_url
from drsftp.netem.link import stop_process

MiB = 1 << 20
SIZE = 24 * MiB + 12345  # not a multiple of any range size


def _serve(root, certs_, *extra):
    """drsftp serve --require-tls, logging every command (-vv)."""
    return ServerProcess(root, cmd=[PY, "-m", "drsftp", "-vv", "serve", "--root", str(root), "--port", "0",
                                    "--user", USER, "--password", PASSWORD, "--tls-cert", str(certs_.good),
                                    "--require-tls", *extra])


def _json(path):
    with open(path) as f:
        return json.load(f)


def _run(*args, **kw):
    r = drsftp(*args, "--progress", "never", timeout=120, **kw)
    assert r.returncode == 0, r.stderr
    return r


def streams_add_up(record, streams, size):
    """A MODE E transfer opened ``streams`` streams and their bytes add up
    to the file.  Not that each carried some: any block may go on any
    stream (GFD.20), and one whose TLS handshake ends after the others
    took the last blocks carries none."""
    carried = [s["bytes"] for s in record["per_stream"]]
    assert record["streams"] == len(carried) == streams and sum(carried) == size, record


@pytest.fixture
def tls_server(tmp_path, certs):  # noqa: F811 (the imported fixture)
    root = tmp_path / "srv"
    root.mkdir()
    srv = _serve(root, certs)
    try:
        yield srv, ("--tls", "--ca-file", str(certs.ca))
    finally:
        srv.stop()


def test_parallel_get_and_put_over_tls_against_drsftp_serve(tmp_path, tls_server):
    srv, tls = tls_server
    src = make_file(os.path.join(srv.root, "big.bin"), SIZE, seed=21)
    out = tmp_path / "got.bin"
    _run("get", "-P", "4", *tls, "--json", str(tmp_path / "g.json"), srv.url("big.bin"), str(out))
    assert sha256_file(out) == sha256_file(src)
    g = _json(tmp_path / "g.json")
    # the server lists PARALLEL: MODE E, its streams in TLS
    assert g["mode"] == "E", g
    streams_add_up(g, 4, SIZE)
    assert g["drs_peer"] and g["drs_replies"] >= 1  # DRS on the encrypted control connections

    # put -P: MODE E too, four TLS streams
    _run("put", "-P", "4", *tls, "--json", str(tmp_path / "p.json"), str(out), srv.url("up.bin"))
    assert _json(tmp_path / "p.json")["mode"] == "E" and _json(tmp_path / "p.json")["streams"] == 4
    assert sha256_file(os.path.join(srv.root, "up.bin")) == sha256_file(src)

    # -P auto with --verify: the stream controller (DRS streams=N), then HASH
    _run("get", "-P", "auto", "--verify", *tls, "--json", str(tmp_path / "a.json"), srv.url("big.bin"),
         str(tmp_path / "auto.bin"))
    a = _json(tmp_path / "a.json")
    assert a["mode"] == "E" and a["parallel"] == "auto" and a["sha256"] == sha256_file(src)
    streams_add_up(a, auto_streams(a), SIZE)

    log = srv.stderr_text()
    # every session asked for PROT P, then MODE E
    assert len(re.findall(r"<- PROT P", log)) >= 3, log[-2000:]
    assert len(re.findall(r"<- MODE E", log)) == 3
    assert not re.search(r"-> (534|504|522) ", log), log[-2000:]  # (a reply, not a figure such as rate=...534)


def test_a_clear_text_parallel_or_dataset_get_is_refused(tmp_path, tls_server):
    srv, _ = tls_server
    make_file(os.path.join(srv.root, "x.bin"), MiB)
    for args in (("get", "-P", "4", srv.url("x.bin"), str(tmp_path / "x.bin")),
                 ("get", "-r", srv.url(""), str(tmp_path / "tree"))):
        r = drsftp(*args, timeout=60)
        assert r.returncode == 1, r.stderr
        assert "SSL/TLS required on the control channel" in r.stderr and "Traceback" not in r.stderr
    assert not (tmp_path / "x.bin").exists()
    log = srv.stderr_text()
    # no data in clear: the listing asked with the log-in is refused with it (530)
    assert "<- RETR" not in log and "<- LIST" not in log
    assert "-> 150" not in log and "-> 125" not in log and "-> 229" not in log


def test_every_data_connection_is_tls_and_resumes_its_session(tmp_path, tls_server, certs, monkeypatch):  # noqa: F811
    """PROT P in force on the client side: each stream-mode data connection
    of a ranged parallel get and of a dataset job is a TLS connection that
    resumed its control connection's session (ranged as against a server
    without PARALLEL; the job with --stream-mode)."""
    srv, _ = tls_server
    make_file(os.path.join(srv.root, "big.bin"), 8 * MiB, seed=3)
    make_tree(os.path.join(srv.root, "data"), depth=3, files=4)
    seen = []

    def recording(mod):
        orig = mod.start_data

        async def start_data(sock, factory, tls, host, *args):
            transport, proto = await orig(sock, factory, tls, host, *args)
            obj = transport.get_extra_info("ssl_object")
            seen.append((mod.__name__.rsplit(".", 1)[1], obj is not None and obj.session_reused))
            return transport, proto
        monkeypatch.setattr(mod, "start_data", start_data)

    for mod in (ranged, listings, streammode, dataconn):  # (each calls its own start_data)
        recording(mod)
    monkeypatch.setattr(parallel, "extended_block", lambda ctl: False)  # a server without PARALLEL
    opts = TransferOptions(tls=True, ca_file=str(certs.ca), progress=False)
    asyncio.run(parallel.get(parse_url(srv.url("big.bin")), str(tmp_path / "big.bin"), opts, 4))
    n_ranged = len(seen)
    assert n_ranged >= 4
    asyncio.run(run_get([(parse_url(srv.url("data")), False)], str(tmp_path / "data"), opts,
                        JobOptions(recursive=True, sessions=2, progress=False, cached=False)))
    assert_same_tree(os.path.join(srv.root, "data"), tmp_path / "data")
    asyncio.run(run_put([str(tmp_path / "data")], parse_url(srv.url("back")), opts,
                        JobOptions(recursive=True, sessions=2, progress=False, cached=False)))
    assert_same_tree(tmp_path / "data", os.path.join(srv.root, "back"))
    files = sum(len(f) for _, _, f in os.walk(tmp_path / "data"))
    count = {m: sum(name == m for name, _ in seen) for m in ("listings", "streammode", "dataconn")}
    assert count["listings"] >= 4
    assert count["streammode"] == files and count["dataconn"] == files  # gets, puts
    assert all(reused for _, reused in seen), seen


def test_datasets_over_tls_against_drsftp_serve(tmp_path, tls_server):
    srv, tls = tls_server
    data = make_tree(os.path.join(srv.root, "data"), depth=4, files=6)
    out = tmp_path / "out"
    _run("get", "-r", *tls, srv.url("data"), str(out))
    assert_same_tree(data, out)

    # --sync: nothing to copy the second time
    _run("get", "-r", "--sync", *tls, "--json", str(tmp_path / "s.json"), srv.url("data/"), str(out))
    statuses = {f["status"] for f in job_records(tmp_path / "s.json")["files"]}
    assert statuses == {"skipped"}, statuses

    _run("put", "-r", *tls, str(out), srv.url("up"))
    assert_same_tree(data, os.path.join(srv.root, "up"))

    # several sources in one call
    several = tmp_path / "several"
    _run("get", *tls, srv.url("data/plain.txt"), srv.url("data/sub/f003.bin"), str(several) + "/")
    assert sha256_file(several / "f003.bin") == sha256_file(os.path.join(data, "sub", "f003.bin"))
    assert sha256_file(several / "plain.txt") == sha256_file(os.path.join(data, "plain.txt"))

    r = drsftp("ls", "-l", *tls, srv.url("data/"), timeout=60)
    assert r.returncode == 0, r.stderr
    assert any(line.endswith(" with space.txt") for line in r.stdout.splitlines()), r.stdout


VSFTPD_TREE = ("force_dot_files=YES", "anon_mkdir_write_enable=YES")


def test_parallel_and_datasets_over_tls_against_vsftpd_requiring_session_reuse(tmp_path, certs):  # noqa: F811
    tls = ("--tls", "--ca-file", str(certs.ca))
    with vsftpd(tmp_path, certs.good, *VSFTPD_TREE) as (port, root):
        base = f"ftp://127.0.0.1:{port}"
        src = make_file(root / "big.bin", SIZE, seed=22)
        out = tmp_path / "v.bin"
        _run("get", "-P", "4", *tls, "--json", str(tmp_path / "g.json"), f"{base}{src}", str(out))
        assert sha256_file(out) == sha256_file(src)
        g = _json(tmp_path / "g.json")
        assert g["mode"] == "ranged" and g["streams"] == 4 and all(s["bytes"] > 0 for s in g["per_stream"])
        _run("put", "-P", "4", *tls, str(out), f"{base}{root}/pub/v-up.bin")
        assert sha256_file(root / "pub" / "v-up.bin") == sha256_file(src)

        data = make_tree(root / "data", depth=4, files=6)
        _run("get", "-r", "-c", "3", *tls, f"{base}{data}", str(tmp_path / "tree"))
        assert_same_tree(data, tmp_path / "tree")
        _run("put", "-r", "-c", "3", *tls, str(tmp_path / "tree"), f"{base}{root}/pub")
        assert_same_tree(data, root / "pub" / "tree")


def test_ftps_url_parallel_and_recursive_against_implicit_vsftpd(tmp_path, certs):  # noqa: F811
    with vsftpd(tmp_path, certs.good, *VSFTPD_TREE, implicit=True) as (port, root):
        base = f"ftps://127.0.0.1:{port}"
        src = make_file(root / "i.bin", 6 * MiB, seed=23)
        _run("get", "-P", "3", "--ca-file", str(certs.ca), f"{base}{src}", str(tmp_path / "i.bin"))
        assert sha256_file(tmp_path / "i.bin") == sha256_file(src)
        data = make_tree(root / "data", depth=2, files=3)
        _run("get", "-r", "--ca-file", str(certs.ca), f"{base}{data}", str(tmp_path / "tree"))
        assert_same_tree(data, tmp_path / "tree")
        r = drsftp("ls", "--ca-file", str(certs.ca), f"{base}{data}", timeout=60)
        assert r.returncode == 0 and "plain.txt" in r.stdout.splitlines(), r.stderr


THROTTLED_TLS = """
import sys
from pyftpdlib.authorizers import DummyAuthorizer
from pyftpdlib.handlers import ThrottledDTPHandler, TLS_DTPHandler, TLS_FTPHandler
from pyftpdlib.servers import FTPServer
root, rate, user, password, cert = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5]
class DTP(TLS_DTPHandler, ThrottledDTPHandler):
    write_limit = rate
class Handler(TLS_FTPHandler):
    dtp_handler = DTP
    certfile = cert
    tls_control_required = tls_data_required = True
    authorizer = DummyAuthorizer()
Handler.authorizer.add_user(user, password, root, perm="elr")
server = FTPServer(("127.0.0.1", 0), Handler)
print("port", server.socket.getsockname()[1], flush=True)
server.serve_forever()
"""


def _held(record):
    try:
        with open(record) as f:
            return sum(b - a for a, b in json.load(f)["ranges"])
    except (OSError, ValueError):
        return 0


def test_interrupted_parallel_tls_get_continues_with_the_gaps(tmp_path, certs):  # noqa: F811
    """Stock pyftpdlib with TLS required, sending at most 2 MB/s per data
    connection: a -P 4 --tls get stopped with Ctrl-C, then --continue."""
    root = tmp_path / "slow"
    root.mkdir()
    size = 16 * MiB
    src = make_file(root / "f.bin", size, seed=24)
    server = subprocess.Popen([PY, "-c", THROTTLED_TLS, str(root), str(2_000_000), USER, PASSWORD, str(certs.good)],
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    proc = None
    try:
        m = re.match(r"port (\d+)", server.stdout.readline())
        assert m, "throttled pyftpdlib did not start"
        url = f"ftp://{USER}:{PASSWORD}@127.0.0.1:{m.group(1)}/f.bin"
        dest = str(tmp_path / "out.bin")
        record = dest + ".part.ranges"
        tls = ("--tls", "--ca-file", str(certs.ca))
        proc = subprocess.Popen([PY, "-m", "drsftp", "get", "-P", "4", *tls, url, dest, "--progress", "never"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        # 4 streams at 2 MB/s: ~2 s for the file; stop once 3 MB are recorded
        assert wait_until(lambda: _held(record) >= 3_000_000, 30, 0.05), "no progress recorded"
        proc.send_signal(signal.SIGINT)
        assert proc.wait(30) == 130, proc.stderr.read()
        first = _held(record)
        with open(record) as f:
            ranges = json.load(f)["ranges"]
        assert 3_000_000 <= first < size and len(ranges) >= 2  # several ranges, gaps between
        _run("get", "-P", "4", *tls, "--continue", "--json", dest + ".json", url, dest)
        d = _json(dest + ".json")
        assert d["mode"] == "ranged" and d["resumed_from"] == first and d["bytes"] == size - first
        assert sha256_file(dest) == sha256_file(src)
        assert not os.path.exists(record)
    finally:
        if proc is not None:
            stop_process(proc, 10)
        stop_process(server, 10)
