"""`drsftp datapath`: each end's CPU, their sum, and the ratios to curl."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from drsftp.bench.checks import datapath as D


def _run(user: float, sys_: float, exit_: int = 0, seconds: float = 1.0) -> dict:
    return {"exit": exit_, "seconds": seconds, "user": user, "sys": sys_, "rss": 50 << 20, "output": "boom"}


def test_row_sums_both_ends_and_the_softirq_threads():
    r = D._row("vsftpd", "drsftp", "get", 0, 10**9, _run(0.5, 0.25), (0.125, 0.0625), 0.03125, 0.5, 20 << 20)
    assert r["client_cpu_s_per_GB"] == pytest.approx(0.75)
    assert r["server_cpu_s_per_GB"] == pytest.approx(0.1875)
    assert r["sum_cpu_s_per_GB"] == pytest.approx(0.75 + 0.1875 + 0.03125)
    assert r["host_softirq_s_per_GB"] == pytest.approx(0.5)  # recorded, not summed
    assert r["MBps"] == pytest.approx(1000.0) and r["error"] is None


def test_row_per_gb_scales_with_the_size():
    r = D._row("drsftp", "curl", "put", 0, 5 * 10**8, _run(0.1, 0.2), (0.3, 0.1), 0.0, 0.0, 0)
    assert r["client_cpu_s_per_GB"] == pytest.approx(0.6)
    assert r["server_cpu_s_per_GB"] == pytest.approx(0.8)


def test_failed_run_keeps_its_error_and_no_rate():
    r = D._row("drsftp", "drsftp", "put", 0, 10**9, _run(0.1, 0.1, exit_=2), (0.0, 0.0), 0.0, 0.0, 0)
    assert r["MBps"] == 0.0 and r["error"] == "boom"


def _rows(server: str, direction: str, client: str, peer: list[float], own: float = 1.0) -> list[dict]:
    return [D._row(server, client, direction, i, 10**9, _run(own, 0.0), (0.0, p), 0.0, 0.0, 0)
            for i, p in enumerate(peer)]


def test_summary_medians_and_ratios_against_curl_on_the_same_server_and_direction():
    rows = (_rows("vsftpd", "get", "drsftp", [0.3, 0.2, 9.0]) + _rows("vsftpd", "get", "curl", [0.1, 0.1, 0.2], 2.0)
            + _rows("vsftpd", "put", "drsftp", [1.0]) + _rows("vsftpd", "put", "curl", [0.5]))
    s = {(x["server"], x["direction"], x["client"]): x for x in D.summarize(rows)}
    drs = s["vsftpd", "get", "drsftp"]
    assert drs["server_cpu_s_per_GB"] == pytest.approx(0.3)  # median, the outlier ignored
    assert drs["peer_cpu_vs_curl"] == pytest.approx(3.0)
    assert drs["sum_cpu_vs_curl"] == pytest.approx(1.3 / 2.1)
    assert s["vsftpd", "put", "drsftp"]["peer_cpu_vs_curl"] == pytest.approx(2.0)
    assert s["vsftpd", "get", "curl"]["peer_cpu_vs_curl"] is None


def test_summary_takes_the_clients_start_up_off_the_sum():
    rows = _rows("vsftpd", "get", "drsftp", [0.2], own=1.0) + _rows("vsftpd", "get", "curl", [0.1], own=0.9)
    s = {x["client"]: x for x in D.summarize(rows, {("vsftpd", "drsftp"): 0.25, ("vsftpd", "curl"): 0.0}, 5 * 10**8)}
    assert s["drsftp"]["client_startup_s_per_GB"] == pytest.approx(0.5)
    assert s["drsftp"]["sum_after_startup_s_per_GB"] == pytest.approx(0.7)
    assert s["drsftp"]["sum_after_startup_vs_curl"] == pytest.approx(0.7)
    assert s["drsftp"]["sum_cpu_vs_curl"] == pytest.approx(1.2)


def test_summary_leaves_out_failed_runs_and_a_missing_reference():
    rows = _rows("drsftp", "get", "drsftp", [0.2, 0.4])
    rows.append(D._row("drsftp", "drsftp", "get", 2, 10**9, _run(0, 0, exit_=1), (0.0, 50.0), 0.0, 0.0, 0))
    (s,) = D.summarize(rows)
    assert s["runs"] == 2 and s["server_cpu_s_per_GB"] == pytest.approx(0.3)
    assert s["peer_cpu_vs_curl"] is None and s["sum_cpu_vs_curl"] is None


def test_place_labels_name_the_file():
    assert D.place_label(None) == "loopback"
    assert D.place_label((1e9, 0.0005)) == "1gbit-0.5ms"
    assert D.place_label((100e6, 0.025)) == "100mbit-25ms"


def test_softirq_threads_are_the_kernels():
    threads = D._softirq_threads()
    assert threads and all(p.name().startswith("ksoftirqd/") for p in threads)
    assert D._softirq_cpu(threads) >= 0.0


RUN_SIZE = 32 << 20


def _check_output(out: str, where: str) -> dict:
    with open(os.path.join(out, f"datapath-{where}.json")) as f:
        data = json.load(f)
    pairs = {(r["server"], r["client"], r["direction"]) for r in data["runs"] if not r["exit"]}
    assert pairs == {(s, c, d) for s in ("drsftp", "vsftpd") for c in ("drsftp", "curl") for d in ("get", "put")}
    # the server's CPU comes in clock ticks (10 ms): a short run may not reach one on every
    # pair (4 MiB reached none on any pair once, in CI): 32 MiB a run
    assert any(s["server_cpu_s_per_GB"] > 0 for s in data["summary"])
    for s in data["summary"]:
        assert s["server_cpu_s_per_GB"] >= 0 and s["client_cpu_s_per_GB"] > 0
        assert s["sum_cpu_s_per_GB"] >= s["server_cpu_s_per_GB"] + s["client_cpu_s_per_GB"] - 1e-9
        if s["client"] == "curl":
            assert s["peer_cpu_vs_curl"] is None and s["sum_cpu_vs_curl"] is None
        assert s["client_startup_cpu_s"] > 0  # a 1-byte file measured for each client
    return data


def test_loopback_run_reports_every_pair_with_both_ends(tmp_path):
    """vsftpd and curl are installed peers: without them this fails."""
    assert D.run_datapath(RUN_SIZE, 1, str(tmp_path)) == 0
    data = _check_output(str(tmp_path), "loopback")
    assert data["link"] is None and data["size"] == RUN_SIZE


@pytest.mark.root
def test_emulated_link_run_puts_the_ends_on_its_two_sides(tmp_path):
    before = set(os.listdir("/run/netns")) if os.path.isdir("/run/netns") else set()
    assert D.run_datapath(RUN_SIZE, 1, str(tmp_path), link=(1e9, 0.0005)) == 0
    data = _check_output(str(tmp_path), "1gbit-0.5ms")
    assert data["link"] == {"rate_bps": 1e9, "rtt_s": 0.0005}
    after = set(os.listdir("/run/netns")) if os.path.isdir("/run/netns") else set()
    assert after <= before  # the link's namespaces are gone


def test_a_bad_rate_is_one_plain_sentence():
    proc = subprocess.run([sys.executable, "-m", "drsftp", "datapath", "--rate", "fast", "--size", "1MiB"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode != 0
    assert proc.stderr.strip() == "drsftp: error: not a rate: 'fast' (examples: 100mbit, 1gbit, 0 for unlimited)"
