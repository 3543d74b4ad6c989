"""`drsftp copy https://A/... https://B/...` (drsftp/client/http/tpc/;
docs/HTTP.md, "drsftp copy over HTTPS") between two `drsftp serve
--http-port` processes over TLS: pull and push byte-identical with the
remote's macaroon asked for by the client, -P 4, --verify, -r over a
tree, --json's figures from the perf markers, the SSRF refusal, a failure
marker, a silent marker stream, Ctrl-C, and ftp:// to https:// through
the client.  The units: the marker reader and the digest comparison."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time

import pytest
from conftest import PASSWORD, PY, USER, make_file, sha256_file, wait_until
from tpcpeers import BASIC, Script, drsftp_peer, scripted
from xrootdserve import make_test_ca

from drsftp.client.http.errors import HTTPError
from drsftp.client.http.tpc.copy import compare_digests
from drsftp.client.http.tpc.markers import MarkerReader
from drsftp.http import perfmarker

SIZE = 3 * (1 << 20) + 4321
BIG = 150 * (1 << 20) + 777  # three 64 MiB ranges: four streams share them
LOGIN = f"{USER}:{PASSWORD}@"


@pytest.fixture(scope="module")
def ca(tmp_path_factory):
    return make_test_ca(tmp_path_factory.mktemp("ca"))


@pytest.fixture(scope="module")
def pair(ca, tmp_path_factory):
    """A and B, each listing the other (127.0.0.1) in --third-party-peers."""
    d = tmp_path_factory.mktemp("pair")
    with drsftp_peer(d / "a", ca, "--third-party-peers", "127.0.0.1") as a, \
            drsftp_peer(d / "b", ca, "--third-party-peers", "127.0.0.1") as b:
        make_file(a.root / "f.bin", SIZE, seed=3)
        make_file(a.root / "big.bin", BIG, seed=4)
        yield a, b


def url(peer, path: str, login: bool = True) -> str:
    return f"https://{LOGIN if login else ''}127.0.0.1:{peer.port}/{path}"


def copy(ca, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([PY, "-m", "drsftp", "copy", "--ca-file", str(ca.ca), *args], capture_output=True,
                          text=True, timeout=timeout, check=False)


def one_error(r: subprocess.CompletedProcess) -> str:
    """The one sentence of a failed command (never a traceback)."""
    assert "Traceback" not in r.stderr, r.stderr
    lines = [x for x in r.stderr.splitlines() if x.startswith("drsftp: error:")]
    assert len(lines) == 1, r.stderr
    return lines[0]


def copy_log(peer, path: str) -> str:
    assert wait_until(lambda: f"path={path} " in peer.log() or peer.log().rstrip().endswith(f"path={path}"))
    return next(x for x in peer.log().splitlines() if f"path={path}" in x)


def test_pull_is_byte_identical_with_the_sources_macaroon(pair, ca, tmp_path):
    a, b = pair
    report = tmp_path / "r.json"
    r = copy(ca, url(a, "f.bin"), url(b, "pulled.bin"), "--json", str(report))
    assert r.returncode == 0, r.stderr
    assert sha256_file(b.root / "pulled.bin") == sha256_file(a.root / "f.bin")
    rec = json.loads(report.read_text())
    assert (rec["mode"], rec["token"], rec["bytes"], rec["total_size"]) == ("pull", "macaroon", SIZE, SIZE)
    assert rec["result"] == "success: Created" and rec["streams"] == 1 and rec["markers"] >= 1
    assert "f.bin:" in r.stderr  # the result line
    line = copy_log(b, "/pulled.bin")
    assert "direction=put" in line and f"bytes={SIZE}" in line and "complete=yes" in line


def test_push_is_byte_identical(pair, ca):
    a, b = pair
    r = copy(ca, "--push", "-q", url(a, "f.bin"), url(b, "pushed.bin"))
    assert r.returncode == 0 and r.stderr == "", r.stderr
    assert sha256_file(b.root / "pushed.bin") == sha256_file(a.root / "f.bin")
    assert "direction=get" in copy_log(a, "/f.bin")


def test_four_streams_verified_on_both_sides(pair, ca, tmp_path):
    a, b = pair
    report = tmp_path / "r.json"
    r = copy(ca, "-P", "4", "--verify", url(a, "big.bin"), url(b, "big4.bin"), "--json", str(report))
    assert r.returncode == 0, r.stderr
    assert sha256_file(b.root / "big4.bin") == sha256_file(a.root / "big.bin")
    rec = json.loads(report.read_text())
    assert (rec["streams"], rec["parallel"], rec["bytes"]) == (4, 4, BIG)  # Total Stripe Count of the markers
    assert rec["digest"].startswith("sha-256=")
    assert "streams=4" in copy_log(b, "/big4.bin")


def test_digest_comparison():
    same = {"sha-256": "q83vEjRWeJA=", "adler32": "0a1b2c3d"}
    assert compare_digests(same, dict(same), "https://a/f", "https://b/f") == "sha-256=q83vEjRWeJA="
    assert compare_digests({"adler32": "0a1b2c3d"}, same, "https://a/f", "https://b/f") == "adler32=0a1b2c3d"
    with pytest.raises(HTTPError, match=r"^verification failed: sha-256 q83vEjRWeJA=\.\.\. at https://a/f, "
                                        r"AAAAEjRWeJA=\.\.\. at https://b/f$"):
        compare_digests(same, {"sha-256": "AAAAEjRWeJA="}, "https://a/f", "https://b/f")
    with pytest.raises(HTTPError, match="https://b/f offers no digest the other side offers"):
        compare_digests(same, {"md5": "x"}, "https://a/f", "https://b/f")


def test_marker_reader_sums_the_stripes_and_reads_the_reason():
    reader = MarkerReader()
    stream = "".join(perfmarker.format_marker(perfmarker.Marker(1, i, 100 * (i + 1), 3, (f"tcp:10.0.0.{i}:1",)))
                     for i in range(3))
    done = [reader.feed(line) for line in stream.splitlines(keepends=True)]
    assert done.count(True) == 3 and (reader.transferred, reader.stripes, reader.markers) == (600, 3, 3)
    assert reader.remote == ["tcp:10.0.0.0:1", "tcp:10.0.0.1:1", "tcp:10.0.0.2:1"]
    reader.feed(perfmarker.format_marker(perfmarker.Marker(2, 1, 1000, 3)).splitlines()[0])  # a marker begun...
    for line in perfmarker.format_marker(perfmarker.Marker(2, 1, 1000, 3)).splitlines()[1:]:
        reader.feed(line)
    assert reader.transferred == 1400 and not reader.done  # ...the stripe's latest counts
    assert reader.feed(perfmarker.failure("the source answered 404 Not Found"))
    assert reader.failure() == "the source answered 404 Not Found"
    with pytest.raises(ValueError, match="after the result"):
        reader.feed("Perf Marker")
    with pytest.raises(ValueError, match="not a perf-marker line"):
        MarkerReader().feed("<html>")


def _tree(root) -> dict[str, str]:
    files = {"top.bin": 70_000, "one/a.bin": 1, "one/two/b.bin": 300_000, "one/two/zero": 0, "three/c.bin": 5}
    for rel, size in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        make_file(root / rel, size, seed=len(rel))
    (root / "empty").mkdir()
    return {rel: sha256_file(root / rel) for rel in files}


def test_a_tree_by_pull_and_by_push(pair, ca, tmp_path):
    a, b = pair
    want = _tree(a.root / "tree")
    report = tmp_path / "r.json"
    r = copy(ca, "-r", "-c", "2", url(a, "tree"), url(b, "deep/er/"), "--json", str(report))
    assert r.returncode == 0, r.stderr
    assert {rel: sha256_file(b.root / "deep/er/tree" / rel) for rel in want} == want
    assert (b.root / "deep/er/tree/empty").is_dir()
    rec = json.loads(report.read_text())
    assert (rec["files"], rec["dirs"], rec["failed"], rec["bytes"]) == (5, 5, [], 370_006)
    r = copy(ca, "-r", "--push", url(a, "tree/"), url(b, "pushed-tree"))  # the contents, into pushed-tree
    assert r.returncode == 0, r.stderr
    assert {rel: sha256_file(b.root / "pushed-tree" / rel) for rel in want} == want


def test_a_tree_lists_the_files_that_failed_and_copies_the_rest(pair, ca):
    a, b = pair
    want = _tree(a.root / "tree2")
    (b.root / "t2/one/a.bin").mkdir(parents=True)  # a collection where a file goes: that COPY is refused
    r = copy(ca, "-r", url(a, "tree2/"), url(b, "t2/"))
    assert r.returncode == 1 and "Traceback" not in r.stderr
    errors = [x for x in r.stderr.splitlines() if x.startswith("drsftp: error:")]
    assert errors[-1] == "drsftp: error: 1 of 5 files failed", r.stderr
    assert errors[0].startswith("drsftp: error: /tree2/one/a.bin: COPY https://127.0.0.1:") and "409" in errors[0]
    assert {rel: sha256_file(b.root / "t2" / rel) for rel in want if rel != "one/a.bin"} == \
           {rel: h for rel, h in want.items() if rel != "one/a.bin"}


def test_a_tree_goes_on_with_fewer_copies_when_the_servers_take_fewer_connections(ca, tmp_path):
    """-c 12 against servers that take 6 connections from an address: the
    COPYs B refuses (503) and those A's refusal failed are tried again, on
    fewer workers (client/http/tpc/tree.py), and every file arrives."""
    limit = ("--third-party-peers", "127.0.0.1", "--max-connections-per-ip", "6")
    with drsftp_peer(tmp_path / "a", ca, *limit) as a, drsftp_peer(tmp_path / "b", ca, *limit) as b:
        want = {}
        (a.root / "many").mkdir()
        for i in range(40):
            make_file(a.root / "many" / f"f{i}.bin", 20_000 + i, seed=i)
            want[f"f{i}.bin"] = sha256_file(a.root / "many" / f"f{i}.bin")
        r = copy(ca, "-v", "-r", "-c", "12", url(a, "many/"), url(b, "got/"))
        assert r.returncode == 0, r.stderr
        assert "a server is busy (HTTP 503)" in r.stderr
        assert {name: sha256_file(b.root / "got" / name) for name in want} == want


def test_json_figures_come_from_the_markers(pair, ca, tmp_path):
    _, b = pair
    data = os.urandom(40 * 65536)
    script = Script(data=data, pace=0.2)  # about 8 s: a marker at once, then every 5 s
    report = tmp_path / "r.json"
    with scripted(script) as port:
        r = copy(ca, "--progress", "always", f"http://127.0.0.1:{port}/slow.bin", url(b, "slow.bin"),
                 "--json", str(report))
    assert r.returncode == 0, r.stderr
    assert (b.root / "slow.bin").read_bytes() == data
    rec = json.loads(report.read_text())
    assert rec["markers"] >= 2 and 0 < rec["marker_bytes"] <= len(data) and rec["bytes"] == len(data)
    assert rec["remote_connections"] == [f"tcp:127.0.0.1:{port}"] and rec["streams"] == 1
    assert rec["token"] == "none" and rec["seconds"] > 0  # (a source URL without a login gets no token)


def test_a_remote_without_macaroons_gets_its_basic_login_forwarded(pair, ca, tmp_path):
    _, b = pair
    data = os.urandom(300_000)
    script = Script(data=data)  # (a plain HTTP server: POST is 501 there)
    report = tmp_path / "r.json"
    with scripted(script) as port:
        r = copy(ca, f"http://{LOGIN}127.0.0.1:{port}/plain.bin", url(b, "plain.bin"), "--json", str(report))
    assert r.returncode == 0, r.stderr
    assert (b.root / "plain.bin").read_bytes() == data and json.loads(report.read_text())["token"] == "basic"
    got = [h for m, _, h in script.requests if m == "GET"]  # (B's: the client only asks HEAD)
    assert got and got[0].get("Authorization") == BASIC


def test_a_host_outside_third_party_peers_is_refused_in_one_sentence(pair, ca, tmp_path):
    a, _ = pair
    with drsftp_peer(tmp_path / "c", ca) as c:  # (no --third-party-peers: every COPY refused)
        r = copy(ca, url(a, "f.bin"), url(c, "x.bin"))
        assert r.returncode == 1
        line = one_error(r)
        assert line.startswith(f"drsftp: error: COPY https://127.0.0.1:{c.port}/x.bin: permission denied"
                               " (HTTP 403): The source 127.0.0.1 is not in --third-party-peers"), line
        assert not (c.root / "x.bin").exists()


def test_a_failure_marker_is_exit_1_with_its_reason(pair, ca):
    _, b = pair
    script = Script(data=os.urandom(1 << 20), mode="kill", cut=200_000)
    with scripted(script) as port:
        r = copy(ca, f"http://127.0.0.1:{port}/dies.bin", url(b, "dies.bin"))
    assert r.returncode == 1
    line = one_error(r)
    assert line.startswith(f"drsftp: error: the pull of http://127.0.0.1:{port}/dies.bin to"
                           f" https://127.0.0.1:{b.port}/dies.bin failed: the source"), line
    assert not (b.root / "dies.bin").exists()


def test_a_silent_marker_stream_fails_after_timeout(pair, ca):
    _, b = pair
    script = Script(data=os.urandom(1 << 20), mode="stall", cut=100_000)
    with scripted(script) as port:  # (the server's next marker would come after 5 s)
        r = copy(ca, "--timeout", "2", f"http://127.0.0.1:{port}/stall.bin", url(b, "stall.bin"))
    assert r.returncode == 1
    assert one_error(r) == (f"drsftp: error: COPY https://127.0.0.1:{b.port}/stall.bin: no perf marker for 2 s"
                            " (--timeout): the copy was given up")


def test_statuses_and_a_closed_port_are_one_sentence(pair, ca):
    a, b = pair
    bad = f"https://{USER}:Bad-pw-7@127.0.0.1:{b.port}/x.bin"
    r = copy(ca, url(a, "f.bin"), bad)
    assert one_error(r).startswith(f"drsftp: error: COPY https://127.0.0.1:{b.port}/x.bin: login refused")
    assert "Bad-pw-7" not in r.stderr and r.returncode == 1
    r = copy(ca, f"https://{USER}:Bad-pw-7@127.0.0.1:{a.port}/f.bin", url(b, "x.bin"))  # (its HEAD first)
    assert one_error(r).startswith(f"drsftp: error: HEAD https://127.0.0.1:{a.port}/f.bin: login refused")
    r = copy(ca, url(a, "nothing.bin"), url(b, "x.bin"))
    assert one_error(r) == (f"drsftp: error: HEAD https://127.0.0.1:{a.port}/nothing.bin: no such file or"
                            " directory (HTTP 404)")
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        closed = s.getsockname()[1]  # (bound, never listening: nothing answers there)
        r = copy(ca, url(a, "f.bin"), f"https://127.0.0.1:{closed}/x.bin")
    assert one_error(r) == f"drsftp: error: cannot connect to 127.0.0.1:{closed}: connection refused"
    assert not (b.root / "x.bin").exists()


def test_ctrl_c_ends_the_copy_and_leaves_the_destination(pair, ca):
    _, b = pair
    (b.root / "kept.bin").write_bytes(b"the old file")
    script = Script(data=os.urandom(64 * 65536), pace=0.2)
    with scripted(script) as port:
        proc = subprocess.Popen([PY, "-m", "drsftp", "copy", "--ca-file", str(ca.ca),
                                 f"http://127.0.0.1:{port}/f.bin", url(b, "kept.bin")],
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        try:
            assert wait_until(lambda: any(m == "GET" for m, _, _ in script.requests), 30)
            time.sleep(0.5)
            proc.send_signal(signal.SIGINT)
            _, err = proc.communicate(timeout=30)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        assert proc.returncode == 130, err
        assert "Traceback" not in err
        line = copy_log(b, "/kept.bin")
        assert "complete=no" in line
    assert (b.root / "kept.bin").read_bytes() == b"the old file"


def test_max_time_stops_the_copy_with_28(pair, ca, tmp_path):
    _, b = pair
    script = Script(data=os.urandom(64 * 65536), pace=0.2)
    report = tmp_path / "r.json"
    with scripted(script) as port:
        r = copy(ca, "--max-time", "2", f"http://127.0.0.1:{port}/f.bin", url(b, "late.bin"), "--json", str(report))
    assert r.returncode == 28, r.stderr
    assert json.loads(report.read_text())["complete"] is False
    assert "complete=no" in copy_log(b, "/late.bin") and not (b.root / "late.bin").exists()


def test_ftp_to_https_goes_through_the_client(pair, ca):
    a, b = pair
    ftp = f"ftp://{LOGIN}127.0.0.1:{a.srv.port}/f.bin"
    r = copy(ca, "--verify", ftp, url(b, "viaclient.bin"))
    assert r.returncode == 0, r.stderr
    assert "drsftp: ftp:// to https://: the data goes through this host" in r.stderr.splitlines()
    assert sha256_file(b.root / "viaclient.bin") == sha256_file(a.root / "f.bin")
    back = f"ftp://{LOGIN}127.0.0.1:{b.srv.port}/back.bin"
    r = copy(ca, "-q", url(a, "f.bin"), back)
    assert r.returncode == 0 and r.stderr == "", r.stderr
    assert sha256_file(b.root / "back.bin") == sha256_file(a.root / "f.bin")
    assert not [p for p in os.listdir(os.environ.get("TMPDIR", "/tmp")) if p.startswith("drsftp-relay-")]


def test_usage_errors(ca):
    h = "127.0.0.1:9"  # (refused before any connection: nothing is sent there)
    for argv, said in ((["--continue", f"https://{h}/a", f"https://{h}/b"], "--continue is not supported"),
                       (["--push", f"ftp://{h}/a", "/tmp/x"], "--push is for a copy between two https:// URLs"),
                       (["-r", f"ftp://{h}/a/", f"https://{h}/b/"], "a tree between ftp:// and https://"),
                       ([f"https://{h}/a/", f"https://{h}/b/"], "names a directory")):
        r = copy(ca, *argv)
        assert r.returncode == 2 and said in r.stderr and "Traceback" not in r.stderr, (argv, r.stderr)



def test_an_https_url_and_a_local_path_are_a_get_or_a_put(pair, ca, tmp_path):
    a, b = pair
    local = tmp_path / "here.bin"
    assert copy(ca, "-q", url(a, "f.bin"), str(local)).returncode == 0
    assert sha256_file(local) == sha256_file(a.root / "f.bin")
    r = copy(ca, "-q", str(local), url(b, "up/"))
    assert r.returncode == 1 and "409" in one_error(r)  # (no up/ on B: put makes no parents)
    assert copy(ca, "-q", str(local), url(b, "")).returncode == 0
    assert sha256_file(b.root / "here.bin") == sha256_file(local)
