"""`drsftp bench third-party` (drsftp/bench/thirdparty/run.py; docs/BENCHMARKS.md,
"Third-party"): the entries' commands (FTP and HTTP), the options checked
before anything runs, what a run keeps of drsftp's --json, of `ss` and of
B's log, the tables, `drsftp benchreport` on its JSON, and (root) the bench
itself on a small, fast topology: the FTP entries, and the HTTP ones
between two `drsftp serve --http-port` and between two XRootD servers."""

from __future__ import annotations

import json
import os
import pathlib
import shutil
import tempfile

import pytest
from conftest import Reached, stop_at_run, usage_exit

from drsftp.bench.common.datasets import workload
from drsftp.bench.common.sampler import Sampler
from drsftp.bench.common.tunings import Path
from drsftp.bench.common.xrootd import TLSFiles
from drsftp.bench.thirdparty import run as tb
from drsftp.bench.thirdparty.report import drs_table, entry_table, first_decisions
from drsftp.bench.thirdparty.summary import copy_summary, server_lines, sockets_summary
from drsftp.cli import main

A, B = "10.203.0.2", "10.203.0.3"


TLS = TLSFiles(*(pathlib.Path(p) for p in ("/w/tls/ca.pem", "/w/tls/ca-dir", "/w/tls/c.pem", "/w/tls/k.pem")))


def _ctx(tree=False):
    wl = workload("small" if tree else "big")
    return tb.Ctx(A, B, "/w/a" if tree else "/w/a/big", "/w/b", wl, "/w/r.json", TLS)


def test_entries_run_the_issue_s_commands_at_both_node_addresses():
    copy = tb.ENTRIES["copy-Pauto"].argv(_ctx())
    assert copy[copy.index("-P") + 1] == "auto" and "copy" in copy and "-r" not in copy
    assert copy[-2:] == [f"ftp://bench:bench-pass@{A}:2121/big.bin", f"ftp://bench:bench-pass@{B}:2121/big.bin"]
    tree = tb.ENTRIES["copy-r"].argv(_ctx(tree=True))
    assert "-r" in tree and "-P" not in tree and "-c" not in tree  # its defaults
    assert tree[-2:] == [f"ftp://bench:bench-pass@{A}:2121/small/", f"ftp://bench:bench-pass@{B}:2121/small/"]
    get = tb.ENTRIES["get-Pauto-on-b"]
    assert get.node == "b" and not get.third_party  # on B, from A, over the same A-B link
    assert get.argv(_ctx())[-2:] == [f"ftp://bench:bench-pass@{A}:2121/big.bin", "/w/b/big.bin"]
    guc = tb.ENTRIES["gridftp-p4-16M"].argv(_ctx())
    assert guc[:5] == ["globus-url-copy", "-p", "4", "-tcp-bs", "16M"]
    assert guc[-2:] == [f"ftp://{A}:2811/w/a/big/big.bin", f"ftp://{B}:2811/w/b/big.bin"]  # server to server
    fast = tb.ENTRIES["gridftp-fast"].argv(_ctx(tree=True))
    for flag in ("-r", "-cd", "-fast", "-pp"):
        assert flag in fast
    assert fast[fast.index("-cc") + 1] == "8" and fast[fast.index("-tcp-bs") + 1] == "16M"
    assert tb.ENTRIES["gridftp-fast-on-b"].argv(_ctx(tree=True))[-1] == "file:///w/b/small/"


def test_the_http_entries_pull_from_a_to_b_over_tls():
    auto = tb.ENTRIES["https-copy-Pauto"].argv(_ctx())
    assert auto[auto.index("--ca-file") + 1] == "/w/tls/ca.pem" and auto[auto.index("-P") + 1] == "auto"
    assert auto[-2:] == [f"https://bench:bench-pass@{A}:8443/big.bin", f"https://bench:bench-pass@{B}:8443/big.bin"]
    tree = tb.ENTRIES["https-copy-r"].argv(_ctx(tree=True))
    assert "-r" in tree and "-P" not in tree and tree[-1] == f"https://bench:bench-pass@{B}:8443/small/"
    gfal = tb.ENTRIES["gfal-pull"].argv(_ctx())
    assert gfal[:3] == ["env", "X509_CERT_DIR=/w/tls/ca-dir", "GFAL_PYTHONBIN=/usr/bin/python3"]
    assert gfal[gfal.index("--copy-mode") + 1] == "pull" and "-n" not in gfal
    assert "HTTP PLUGIN:RETRIEVE_BEARER_TOKEN=true" in gfal  # gfal2 asks each end for its macaroon
    assert any(x.startswith("HTTP PLUGIN:HEADERS=Authorization: Basic ") for x in gfal)
    assert gfal[-2:] == [f"davs://{A}:8443/big.bin", f"davs://{B}:8443/big.bin"]  # no password in the URLs
    n4 = tb.ENTRIES["gfal-pull-n4"].argv(_ctx())
    assert n4[n4.index("-n") + 1] == "4"
    xrd = tb.ENTRIES["gfal-pull-xrootd-8"].argv(_ctx())
    assert xrd[-2:] == [f"davs://{A}:8444/big.bin", f"davs://{B}:8444/big.bin"] and xrd[xrd.index("-n") + 1] == "8"
    assert not any("HEADERS" in x for x in xrd)  # XRootD admits any user
    assert {tb.ENTRIES[n].servers for n in ("gfal-pull", "https-copy-r", "gfal-pull-xrootd")} == {"drsftp-https",
                                                                                               "xrootd"}
    with pytest.raises(ValueError, match="needs the run's certificates"):
        tb.ENTRIES["gfal-pull"].argv(tb.Ctx(A, B, "/w/a/big", "/w/b", workload("big"), "/w/r.json"))


class _Nodes:
    def node_addr(self, node):
        return {"a": A, "b": B}[node]


def test_the_tree_entries_at_more_copies_raise_both_servers_per_address_limit():
    """https-copy-r-cN: `-c N` at the client, and both drsftp serves take
    more connections from one address than N COPYs (B's) and N links (A's);
    https-copy-r-kernel: the default command, both servers on --tuning kernel."""
    from drsftp.bench.thirdparty.entries import PER_IP, TREE_COPIES
    from drsftp.bench.thirdparty.servers import server_argv

    for n in TREE_COPIES:
        e = tb.ENTRIES[f"https-copy-r-c{n}"]
        argv = e.argv(_ctx(tree=True))
        assert e.tree and argv[argv.index("-c") + 1] == str(n) and "-r" in argv
        assert n + 2 < PER_IP  # (the walk's own connections beside the COPYs)
        for node, peer in (("a", "b"), ("b", "a")):
            served = server_argv(_Nodes(), e.servers, node, peer, "/w/a", "/w", TLS, e.serve)
            assert served[served.index("--max-connections-per-ip") + 1] == str(PER_IP)
            assert "--http-port" in served
    plain = server_argv(_Nodes(), "drsftp-https", "b", "a", "/w/b", "/w", TLS, tb.ENTRIES["https-copy-r"].serve)
    assert "--max-connections-per-ip" not in plain and "--tuning" not in plain  # (the servers' defaults)
    kernel = tb.ENTRIES["https-copy-r-kernel"]
    assert kernel.argv(_ctx(tree=True)) == tb.ENTRIES["https-copy-r"].argv(_ctx(tree=True))
    served = server_argv(_Nodes(), kernel.servers, "b", "a", "/w/b", "/w", TLS, kernel.serve)
    assert served[served.index("--tuning") + 1] == "kernel"


def _sampler(rows):
    s = Sampler([], 2121)
    s.samples = rows
    return s


def test_the_client_s_sockets_are_not_the_data_path():
    """An HTTP copy's request and macaroon connections share the data's
    port: the sockets to the client are left out at A and at B."""
    client = "10.202.1.1"
    data = {"peer": f"[::ffff:{B}]:40000", "sk_w": 5_000_000, "rtt_ms": 101.0, "bytes_acked": 9 << 20}
    request = {"peer": f"{client}:51000", "sk_w": 1_000, "rtt_ms": 5.0, "bytes_acked": 2 << 20}
    s_a = _sampler([(0.5, [dict(data), dict(request)]), (0.75, [dict(request)])])
    s_b = _sampler([(0.25, [{"peer": f"{client}:8443", "bytes_received": 900}]),
                    (0.5, [{"peer": f"{A}:8443", "bytes_received": 1 << 20, "sk_r": 10}])])
    got = sockets_summary(s_a, s_b, 0.0, 2.0, 1 << 20, 0.25, {client})
    assert got["streams_max"] == 1 and got["ss_rtt_ms"] == 101.0 and got["peak_snd_used"] == 5_000_000
    assert got["data_seconds"] == 1.625  # from B's first byte from A (0.5 s), not the COPY's request (0.25 s)
    kept = sockets_summary(_sampler([(0.5, [dict(request)])]), _sampler([]), 0.0, 2.0, 1, 0.25)
    assert kept["streams_max"] == 1  # (FTP: its control port is left out by the sampler itself)


def test_b_s_log_lines_say_the_streams_and_the_drs_exchange(tmp_path):
    log = tmp_path / "b.log"
    log.write_text("old line path=/x.bin remote=https://a/x streams=9\n")
    mark = log.stat().st_size
    with open(log, "a") as f:
        for streams, peer in ((4, "yes"), (4, "no")):
            f.write(f"2026-01-01T00:00:00Z transfer peer=10.202.1.1 data_peer={A} user=bench direction=put "
                    f"path=/big.bin bytes=536870912 seconds=6.5 rate=660Mbit/s streams={streams} drs_peer={peer} "
                    f"complete=yes tls=yes remote=https://{A}:8443/big.bin\n")
        f.write("2026-01-01T00:00:01Z login user=bench peer=10.202.1.1\n")
    assert server_lines(str(log), mark) == {"copies": 2, "streams": [4], "drs_peer": 1, "complete": 2,
                                            "seconds_median": 6.5}
    assert server_lines(str(tmp_path / "gone.log"), 0) == {}


def test_entry_lists():
    assert tb.entry_names("default") == list(tb.DEFAULT_ENTRIES)
    assert tb.entry_names("all") == list(tb.ENTRIES)
    assert tb.entry_names("copy-P4, gridftp-p4-16M,copy-P4") == ["copy-P4", "gridftp-p4-16M"]
    with pytest.raises(ValueError, match="unknown third-party entry 'bbcp'"):
        tb.entry_names("copy-P4,bbcp")
    with pytest.raises(ValueError, match="at least one entry"):
        tb.entry_names(" , ")


def test_the_topology_is_the_issue_s():
    cfg = tb.ThirdConfig(path=Path(rate=1e9, rtt=0.1), entries=["copy-P4"])
    assert cfg.topology() == ["client-a:rtt=0.005s,rate=1000000000", "client-b:rtt=0.005s,rate=1000000000",
                              "a-b:rtt=0.1s,rate=1000000000"]


def test_the_tree_digest_sees_a_changed_byte_and_a_missing_file(tmp_path):
    wl = workload("small", 0.02)  # 4 files
    for d in ("x", "y"):
        for rel, _ in wl.files:
            (tmp_path / d).mkdir(exist_ok=True)
            (tmp_path / d / rel).write_bytes(b"\1" * 10)
    assert tb.tree_digest(str(tmp_path / "x"), wl) == tb.tree_digest(str(tmp_path / "y"), wl)
    (tmp_path / "y" / wl.files[2][0]).write_bytes(b"\1" * 9 + b"\2")
    assert tb.tree_digest(str(tmp_path / "x"), wl) != tb.tree_digest(str(tmp_path / "y"), wl)
    os.unlink(tmp_path / "y" / wl.files[0][0])
    assert tb.tree_digest(str(tmp_path / "y"), wl) is None


@pytest.fixture
def no_run(monkeypatch, tmp_path):
    """A third-party run, where it would start, raises Reached."""
    return stop_at_run(monkeypatch, tmp_path, (tb, "run_third"))


@pytest.mark.parametrize("argv,message", [
    (["copy-P4,bbcp"], "unknown third-party entry 'bbcp'; known: copy-Pauto, "),
    (["--rtts", "100ms,50ms"], "the third-party bench runs on one A-B link: give one --rtts value"),
    (["--rates", "0"], "--rates: a bench rate must be above 0 (0 is a link without a ceiling)"),
    (["--streams", "4"], "unrecognized arguments: --streams; see drsftp bench third-party --help"),
    (["--scale", "2"], "--scale must be above 0 and at most 1, not 2"),
    (["--losses", "2"], "--losses: loss must lie between 0 and 100%, not 200%"),
    (["--reps", "0"], "--reps must be at least 1"),
])
def test_options_are_checked_before_anything_is_made(argv, message, no_run, capsys):
    assert usage_exit(["bench", "third-party", *argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"drsftp: error: {message}") and err.count("\n") == 1, err
    assert os.listdir(no_run) == []


def test_a_valid_command_line_runs_its_entries_on_its_link(no_run):
    with pytest.raises(Reached) as got:
        main(["bench", "third-party", "copy-Pauto,gridftp-p4-16M", "--rtts", "40ms", "--rates", "200mbit",
              "--reps", "2", "--scale", "0.25"])
    cfg = got.value.args[0]
    assert cfg.entries == ["copy-Pauto", "gridftp-p4-16M"] and cfg.reps == 2 and cfg.scale == 0.25
    assert cfg.path == Path(rate=200e6, rtt=0.04)
    with pytest.raises(Reached) as got:
        main(["bench", "third-party"])
    assert got.value.args[0].entries == list(tb.DEFAULT_ENTRIES) and got.value.args[0].path.rtt == 0.1


COPY_JSON = {
    "direction": "copy", "mode": "E", "streams": 8, "parallel": "auto", "streams_start": 4,
    "data_rtt_first_ms": 100.4, "rtt_min_ms": 100.1, "stream_changes": [{"t": 0.17, "streams": 8}],
    "servers": {"source": [{"t": 0.0, "streams": 4},
                           {"t": 0.1, "rtt_us": 100400, "cwnd": 57920, "sndbuf": 2097152, "streams": 4},
                           {"t": 0.2, "rtt_us": 120000, "cwnd": 30_000_000, "sndbuf": 40_000_000, "streams": 8}],
                "destination": [{"t": 0.1, "rtt_us": 101000, "wnd": 1_000_000, "rcvbuf": 1_600_000},
                                {"t": 0.2, "rtt_us": 119000, "wnd": 20_000_000, "rcvbuf": 33_000_000}]},
}


def test_a_copy_s_json_is_kept_in_brief():
    s = copy_summary(COPY_JSON)
    assert s["source_rtt_ms"] == 110.2 and s["dest_rtt_ms"] == 110.0  # the medians of the reports with an RTT
    assert (s["source_cwnd_max"], s["source_sndbuf_max"], s["dest_wnd_max"]) == (30_000_000, 40_000_000, 20_000_000)
    assert s["reports"] == [3, 2] and len(s["first_reports"]["source"]) == 3
    tree = copy_summary({"direction": "copy", "sessions_max": 16, "files": [
        dict(COPY_JSON, status="ok", seconds=0.2, cached=True), dict(COPY_JSON, status="ok", seconds=0.4),
        {"status": "failed", "seconds": 1.0}]})
    assert (tree["files"], tree["ok"], tree["cached"], tree["sessions_max"]) == (3, 2, 1, 16)
    assert tree["file_seconds_median"] == 0.3 and tree["source_rtt_ms"] == 110.2


def _run(entry, mbps, rep=0, workload_="big", **kw):
    return {"entry": entry, "workload": workload_, "rep": rep, "files": 1, "bytes": 512 << 20, "mbps": mbps,
            "complete": mbps > 0, "bytes_identical": mbps > 0, "third_party": not entry.endswith("-on-b"),
            "ceiling_mbps": 965.3, "bdp": 12_500_000, "peak_snd_used": 25_000_000, "peak_rcv_used": 1_250_000,
            "data_mbps": mbps * 1.1, "ss_rtt_ms": 125.0, "control_rtt_s": 0.005, "cpu_a_s": 0.2, "cpu_b_s": 1.0, **kw}


def test_the_tables_divide_by_gridftp_and_by_the_direct_get():
    runs = [_run("copy-Pauto", 800.0, client_report=copy_summary(COPY_JSON)), _run("gridftp-p4-16M", 780.0),
            _run("get-Pauto-on-b", 760.0), _run("copy-P4", 0.0, error="exit 1: refused"),
            _run("copy-Pauto", 820.0, rep=1, client_report=copy_summary(COPY_JSON))]
    lines = entry_table(runs, "big").splitlines()
    assert lines[0].startswith("| entry | Mbit/s | x gridftp-p4-16M | x get-Pauto-on-b | data phase, Mbit/s |")
    assert lines[2] == ("| copy-Pauto | 810 [800-820] | 1.04 | 1.07 | 891 | 92% | 125 | 2.0 | 0.1 | 0.20 / 1.00 "
                        "| 2/2 | 2/2 |")
    assert lines[4].startswith("| get-Pauto-on-b | 760 ") and "| 0.20 / - |" in lines[4]  # B runs the client
    assert lines[5].startswith("| copy-P4 | failed: exit 1: refused |") and lines[5].endswith("| 0/1 | 0/1 |")
    drs = drs_table(runs).splitlines()
    assert drs[2] == ("| copy-Pauto | 5 | 110 | 110 | 125 | 30.0 / 40.0 | 20.0 / 33.0 | 4 -> 8 at 0.17 s "
                      "(RTT 100 ms), 2/2 runs | 2 |")
    assert first_decisions([{"streams": 4, "stream_changes": []}]) == "4 (fixed)"


def test_benchreport_prints_a_saved_third_party_result(tmp_path, capsys):
    runs = [_run("copy-Pauto", 800.0, client_report=copy_summary(COPY_JSON)), _run("gridftp-p4-16M", 780.0),
            _run("copy-r", 500.0, workload_="small"), _run("gridftp-fast", 520.0, workload_="small")]
    saved = tmp_path / "third-party.json"
    bounce = {"port_to": "10.202.1.2:5001", "listed": [B], "refused": True,
              "reply": "501 Rejected data connection to foreign address 10.202.1.2:5001; allow it with "
                       "--third-party-peers."}
    saved.write_text(json.dumps({"third_party": 1, "topology": [], "runs": runs, "bounce": bounce}))
    assert main(["benchreport", str(saved), "--dataset", "small"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("| entry | Mbit/s | x gridftp-fast |") and out[3].startswith("| gridftp-fast | 520 ")
    assert main(["benchreport", str(saved)]) == 0
    text = capsys.readouterr().out
    assert "**big**" in text and "**small**" in text and "Bounce check: PORT 10.202.1.2:5001 to A" in text
    assert main(["benchreport", str(saved), "--table", "drs"]) == 0
    assert capsys.readouterr().out.splitlines()[2].startswith("| copy-Pauto | 5 | 110 |")
    for argv, message in (
            (["--dataset", "mixed"], "no runs of the 'mixed' dataset in these results (they hold big, small)"),
            (["--table", "speed"], "--table speed applies to bench results, not third-party results"),
            (["--base", "bogus"], "unknown --base 'bogus'; choose from copy-Pauto, "),
            (["--table", "drs", "--dataset", "big"], "--table drs prints the DRS table alone")):
        assert main(["benchreport", str(saved), *argv]) in (1, 2)
        err = capsys.readouterr().err
        assert err.startswith(f"drsftp: error: {message}") and err.count("\n") == 1, err
    broken = dict(runs[0])
    del broken["bytes_identical"]
    saved.write_text(json.dumps({"third_party": 1, "runs": [broken]}))
    assert main(["benchreport", str(saved)]) == 1
    assert "run 1 has no bytes_identical" in capsys.readouterr().err


@pytest.mark.root
def test_the_bench_runs_every_entry_byte_identical_on_a_small_topology():
    """The real programs at both ends (two drsftp serves, two GridFTP
    servers) on a small, fast topology: every run complete and
    byte-identical, the bounce refused, the copy's DRS reports from the
    A-B path (40 ms), not the client's 5 ms."""
    work = tempfile.mkdtemp(prefix="drs-third-", dir="/var/tmp")  # GridFTP's nobody must reach it
    try:
        cfg = tb.ThirdConfig(path=Path(rate=200e6, rtt=0.04), reps=1, scale=1 / 64, workdir=work, max_time=60,
                             entries=["copy-Pauto", "get-Pauto-on-b", "gridftp-p4-16M", "copy-r", "gridftp-fast"],
                             log=lambda s: None)
        out = tb.run_third(cfg)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    assert out["bounce"]["refused"] and "--third-party-peers" in out["bounce"]["reply"], out["bounce"]
    assert [r["entry"] for r in out["runs"]] == cfg.entries
    for r in out["runs"]:
        assert r["complete"] and r["bytes_identical"], {k: r.get(k) for k in ("entry", "error")}
    copy = out["runs"][0]["client_report"]
    assert copy["source_rtt_ms"] >= 36 and copy["streams_start"] == 4, copy


HTTP_ENTRIES = ["https-copy-Pauto", "https-copy-P4", "gfal-pull", "gfal-pull-n4", "https-copy-r"]


@pytest.mark.root
def test_the_http_entries_run_byte_identical_between_two_drsftp_serves():
    """drsftp copy https:// and gfal-copy --copy-mode pull between two
    `drsftp serve --http-port` on the small topology, over TLS with the
    run's CA (gfal2 with its own macaroons): every run byte-identical, each
    a pull by B (its log: the streams asked for, DRS reports exchanged with
    A), the data sockets on the A-B path (40 ms), not the client's."""
    assert shutil.which("gfal-copy"), "gfal-copy is missing (Debian: gfal2-util-scripts, gfal2-plugin-http)"
    work = tempfile.mkdtemp(prefix="drs-third-", dir="/var/tmp")
    try:
        # 32 MiB: one range of 64 MiB, so one of the four streams carries it; the tree 6 files
        cfg = tb.ThirdConfig(path=Path(rate=200e6, rtt=0.04), reps=1, scale=1 / 32, workdir=work, max_time=90,
                             entries=HTTP_ENTRIES, bounce_check=False, log=lambda s: None)
        out = tb.run_third(cfg)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    runs = {r["entry"]: r for r in out["runs"]}
    assert list(runs) == HTTP_ENTRIES
    for name, r in runs.items():
        assert r["complete"] and r["bytes_identical"], {k: r.get(k) for k in ("entry", "error")}
        b = r["server_b"]
        assert b["copies"] == r["files"] == b["complete"] == b["drs_peer"], (name, b)
        assert r["ss_rtt_ms"] is None or r["ss_rtt_ms"] >= 36, (name, r["ss_rtt_ms"])
    assert [runs[n]["server_b"]["streams"] for n in HTTP_ENTRIES] == [[1], [4], [1], [4], [1]]
    assert runs["https-copy-r"]["files"] > 1 and runs["https-copy-Pauto"]["client_report"]["mode"] == "pull"


def test_a_second_run_in_the_same_workdir_is_refused(tmp_path):
    """Each run empties B's root: two at once would delete each other's files."""
    import fcntl

    with open(tmp_path / ".lock", "w") as held:
        fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
        cfg = tb.ThirdConfig(path=Path(rate=1e9, rtt=0.1), entries=["copy-P4"], workdir=str(tmp_path))
        with pytest.raises(RuntimeError, match=f"another third-party bench is running in {tmp_path}: wait"):
            tb.run_third(cfg)
    assert sorted(os.listdir(tmp_path)) == [".lock"]  # nothing made, nothing emptied


@pytest.mark.root
def test_the_xrootd_entries_pull_byte_identical_between_two_xrootds():
    """gfal-copy --copy-mode pull between two XRootD servers with XrdHttpTPC
    and macaroons (bench/common/xrootd.py), at its default and -n 4."""
    work = tempfile.mkdtemp(prefix="drs-third-", dir="/var/tmp")  # xrootd runs as nobody: it must reach it
    try:
        cfg = tb.ThirdConfig(path=Path(rate=200e6, rtt=0.04), reps=1, scale=1 / 32, workdir=work, max_time=90,
                             entries=["gfal-pull-xrootd", "gfal-pull-xrootd-4"], bounce_check=False,
                             log=lambda s: None)
        out = tb.run_third(cfg)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    for r in out["runs"]:
        assert r["complete"] and r["bytes_identical"], {k: r.get(k) for k in ("entry", "error")}
        assert r["servers"] == "xrootd" and r["ss_rtt_ms"] >= 36, r


def test_the_drs_table_leaves_out_http_copies():
    """An HTTP copy's --json holds no DRS reports (they are in B's log): no row of dashes."""
    runs = [_run("copy-Pauto", 800.0, client_report=copy_summary(COPY_JSON), servers="drsftp"),
            _run("https-copy-P4", 540.0, client_report={"direction": "copy", "mode": "pull", "streams": 4},
                 servers="drsftp-https")]
    lines = drs_table(runs).splitlines()
    assert len(lines) == 3 and lines[2].startswith("| copy-Pauto |")
