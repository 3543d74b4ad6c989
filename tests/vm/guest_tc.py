"""The tc backend where it is the default: run inside a kernel that has
sch_netem (tests/test_netem_tc_vm.py boots one under qemu and runs this
file there with pytest).  Not collected on the host: its name is no test_*.

The rates are ones software emulation (TCG) carries: 30 Mbit/s, 50 ms.
Where the emulated CPU, not the link, sets a figure (BBR's pacing timers,
the guest's own ping overhead), the check is on what the link controls.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys

import pytest
from conftest import wait_until

from drsftp.bench.common.tunings import Path
from drsftp.bench.compare.report import print_table
from drsftp.bench.compare.runner import BenchConfig, run_bench
from drsftp.netem import namespaces as nsmod
from drsftp.netem.errors import NetemError
from drsftp.netem.link import Link
from drsftp.netem.spec import MTU

RTT, RATE = 0.05, 30e6
BDP_PACKETS = int(RATE * RTT / 8 / MTU)  # 125: the default queue
DELAY_LINE = -(-int(RATE * RTT / 2) // (8 * MTU))  # 63 packets in flight one way


def drsftp(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "drsftp", *args], capture_output=True, text=True, timeout=timeout)


def sh(*argv: str) -> str:
    return subprocess.run(argv, capture_output=True, text=True, timeout=60, check=True).stdout


def leftovers(name: str) -> list[str]:
    """Whatever of a link is still there: namespaces, devices, the state file."""
    names = nsmod.Names(name)
    found = [ns for ns in nsmod.list_namespaces() if ns in (names.ns("client"), names.ns("server"))]
    found += [d for d in (names.dev("client"), names.dev("server")) if os.path.exists(f"/sys/class/net/{d}")]
    return found + [f for f in (names.state_file,) if os.path.exists(f)]


def test_the_kernel_has_sch_netem():
    assert os.path.exists("/sys/module/sch_netem"), "the guest did not load sch_netem"


def test_auto_picks_tc_and_makes_the_link_the_spec_says():
    r = drsftp("netem", "up", "vmauto", "--rtt", "50ms", "--rate", "30mbit", "--json")
    assert r.returncode == 0, r.stderr
    try:
        info = json.loads(r.stdout)
        assert info["backend"] == "tc"
        qdisc = sh("tc", "-n", "drs-vmauto-c", "qdisc", "show", "dev", "drsvmautoc")
        # the queue (1 BDP) plus the packets 25 ms hold at 30 Mbit/s; IP bytes charged
        assert f"limit {BDP_PACKETS + DELAY_LINE} delay 25ms rate 30Mbit packetoverhead -14" in qdisc, qdisc
        assert "gso_max_segs 1 " in sh("ip", "-n", "drs-vmauto-s", "-d", "link", "show", "dev", "drsvmautos")
        # no ARP crossing the link: the very first reply takes one RTT, not two
        out = sh(*nsmod.ns_exec_prefix("drs-vmauto-c"), "ping", "-c", "10", "-i", "0.05", "10.201.0.2")
        times = [float(x) / 1000 for x in re.findall(r"time=([\d.]+) ms", out)]
        assert len(times) == 10 and min(times) >= RTT and times[0] < 2 * RTT, times
        neigh = sh("ip", "-n", "drs-vmauto-c", "neigh", "show")
        assert "10.201.0.2 dev drsvmautoc lladdr 02:d5:00:00:00:02 PERMANENT" in neigh, neigh
        st = drsftp("netem", "status", "--json")
        (entry,) = json.loads(st.stdout)
        assert entry["alive"] and entry["stats"]["c2s"]["packets_out"] >= 10  # the kernel's counters, now
        assert entry["stats"]["c2s"]["lost"] == 0 and entry["stats"]["c2s"]["queue_drops"] == 0
    finally:
        down = drsftp("netem", "down", "vmauto")
    assert down.returncode == 0 and "vmauto" in down.stdout, down.stderr
    assert leftovers("vmauto") == []


def test_a_three_node_topology_on_tc():
    """Each link its own veth pair and netem qdiscs: the delay each link
    should have, the neighbours' own addresses, nothing beyond them."""
    links = ["client-a:rtt=10ms,rate=0", "client-b:rtt=10ms,rate=0", "a-b:rtt=50ms,rate=30mbit"]
    r = drsftp("netem", "up", "vmtopo", *[a for link in links for a in ("--link", link)], "--json")
    assert r.returncode == 0, r.stderr
    try:
        info = json.loads(r.stdout)
        assert info["backend"] == "tc"
        nodes = info["nodes"]
        far = sh("tc", "-n", nodes["a"]["namespace"], "qdisc", "show", "dev", "drsvmtopo02a")
        assert f"limit {BDP_PACKETS + DELAY_LINE} delay 25ms rate 30Mbit packetoverhead -14" in far, far
        near = sh("tc", "-n", nodes["client"]["namespace"], "qdisc", "show", "dev", "drsvmtopo00a")
        assert "delay 5ms" in near and "rate" not in near, near

        def ping(node: str, addr: str) -> list[float]:
            out = sh(*nsmod.ns_exec_prefix(nodes[node]["namespace"]), "ping", "-c", "5", "-i", "0.05", addr)
            return [float(x) / 1000 for x in re.findall(r"time=([\d.]+) ms", out)]

        # the emulated CPU adds a millisecond or two to each round trip (docs/NETEM.md)
        assert 0.01 <= min(ping("client", nodes["a"]["addresses"]["client"])) < 0.02
        far_times = ping("a", nodes["b"]["addresses"]["a"])
        assert RTT <= min(far_times) < RTT + 0.01 and far_times[0] < 2 * RTT, far_times  # no ARP first
        node_times = ping("a", nodes["b"]["address"])  # b's own address, routed over a-b
        assert len(node_times) == 5 and RTT <= min(node_times) < RTT + 0.01, node_times
        beyond = subprocess.run(nsmod.ns_exec_prefix(nodes["client"]["namespace"])
                                + ["ping", "-c", "1", "-W", "1", nodes["b"]["addresses"]["a"]],
                                capture_output=True, text=True, timeout=30)
        assert beyond.returncode != 0 and "unreachable" in beyond.stdout + beyond.stderr
        (entry,) = [e for e in json.loads(drsftp("netem", "status", "--json").stdout) if e["name"] == "vmtopo"]
        assert entry["stats"]["a>b"]["packets_out"] >= 10 and entry["stats"]["client>a"]["packets_out"] >= 5
    finally:
        down = drsftp("netem", "down", "vmtopo")
    assert down.returncode == 0 and "vmtopo" in down.stdout, down.stderr
    assert nsmod.link_namespaces("vmtopo") == [] and not os.path.exists(nsmod.Names("vmtopo").state_file)


def test_backend_tc_with_loss_and_a_kill_9_then_down_all():
    r = drsftp("netem", "up", "vmtc", "--backend", "tc", "--rtt", "50ms", "--rate", "30mbit", "--loss", "1%",
               "--json")
    assert r.returncode == 0, r.stderr
    info = json.loads(r.stdout)
    try:
        assert info["backend"] == "tc"
        assert "loss 1%" in sh("tc", "-n", "drs-vmtc-s", "qdisc", "show", "dev", "drsvmtcs")
        os.kill(info["pid"], signal.SIGKILL)
        assert wait_until(lambda: not os.path.exists(f"/proc/{info['pid']}"))
        assert "drs-vmtc-c" in nsmod.list_namespaces()  # the crash left them
        assert "crashed" in drsftp("netem", "status").stdout
    finally:
        down = drsftp("netem", "down", "--all")
    assert down.returncode == 0 and "vmtc" in down.stdout, down.stderr
    assert leftovers("vmtc") == []


def test_ctrl_c_to_the_owner_and_a_failed_build_leave_nothing():
    link = Link(rtt=RTT, rate=RATE, backend="tc").up()
    try:
        assert link.backend == "tc" and leftovers(link.name)
        os.kill(link.owner_pid, signal.SIGINT)
        assert wait_until(lambda: leftovers(link.name) == [], timeout=30)
    finally:
        link.close()
    # the sysctl fails after the veth pair and both qdiscs exist
    failing = Link(rtt=RTT, rate=RATE, backend="tc", sysctls={"net.ipv4.drs_no_such_key": "1"})
    with pytest.raises(NetemError, match="drs_no_such_key"):
        failing.up()
    failing.close()
    assert leftovers(failing.name) == []


def test_jitter_without_a_rate_keeps_packet_order():
    """netem releases its delay line in time order: jitter alone would
    reorder, and the order-keeping rate prevents it (tcnetem.netem_args)."""
    with Link(rtt=0.02, rate=0, jitter=0.008, backend="tc") as link:
        r = link.run("client", ["ping", "-c", "300", "-i", "0.002", link.server_addr], timeout=60)
    seqs = [int(x) for x in re.findall(r"icmp_seq=(\d+)", r.stdout)]
    times = [float(x) / 1000 for x in re.findall(r"time=([\d.]+) ms", r.stdout)]
    assert len(seqs) == 300 and seqs == sorted(seqs), seqs
    assert max(times) - min(times) > 0.008  # the jitter is there: 2 x 8 ms of spread at most


def test_netemcheck_agrees_with_the_spec(tmp_path):
    # reno: BBR's pacing timers run late on the emulated CPU (docs/NETEM.md#the-tc-backend-measured)
    r = drsftp("netemcheck", "--backend", "tc", "--rtts", "50ms", "--paths", "30mbit/50ms", "--losses", "1%",
               "--ccs", "reno", "--quick", "--out", str(tmp_path))
    print(r.stdout, r.stderr)
    assert r.returncode in (0, 1) and "Traceback" not in r.stderr, r.stderr
    rows = {row["what"].split(" (")[0].split(",")[0]: row for row in json.loads((tmp_path / "netem.json").read_text())}
    assert {row["backend"] for row in rows.values()} == {"tc"}
    # netemcheck's own tolerances, where the link alone sets the figure
    assert rows["queue delay"]["ok"], rows["queue delay"]
    assert rows["loss"]["ok"], rows["loss"]
    # the emulated CPU adds its own: the delay is the floor, TCG a few ms on top
    assert RTT <= rows["idle RTT"]["value"] <= 1.2 * RTT, rows["idle RTT"]
    reno = [row for row in json.loads((tmp_path / "netem.json").read_text()) if row["what"].startswith("goodput, reno")]
    assert 0.9 * reno[0]["expected"] <= reno[0]["value"] <= 1.02 * reno[0]["expected"], reno


def test_drs_beats_64k_buffers_on_a_50ms_path(tmp_path):
    """drsftp bench's runner on one path, its `ss` samplers once a second
    (each `ss` costs the emulated CPU a tenth of a second)."""
    cfg = BenchConfig(paths=[Path(rate=RATE, rtt=RTT)], tunings=["stock-64k", "drs"], size=8 << 20, max_time=40,
                      workdir=str(tmp_path), interval=1.0)
    env, results = run_bench(cfg)
    print_table(env, results, cfg.tunings, compact=True)
    runs = {run["tuning"]: run for run in results}
    assert {run["link"]["backend"] for run in runs.values()} == {"tc"}
    assert all(run["complete"] and not run.get("error") for run in runs.values()), runs
    # 64 KiB buffers hold at most ~10 Mbit/s on a 50 ms path; DRS sizes them to the path
    assert runs["drs"]["mbps"] > 1.5 * runs["stock-64k"]["mbps"], {t: run["mbps"] for t, run in runs.items()}
    assert not [ns for ns in nsmod.list_namespaces() if ns.startswith("drs-")]
