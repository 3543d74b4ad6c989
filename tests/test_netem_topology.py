"""`drsftp netem` topologies: nodes joined by links, each link its own
emulated queue, delay and loss (docs/NETEM.md#topologies).

The parsing, naming and addressing are checked without any device; the
live tests (marked ``root``) need root and network namespaces, and fail,
never skip, without them (CI runs as root).
"""

from __future__ import annotations

import json
import os
import re
import secrets
import signal
import subprocess
import sys
import time

import pytest
from conftest import drsftp, wait_until

from drsftp.netem import namespaces as nsmod
from drsftp.netem.errors import NetemError, NetemUsageError
from drsftp.netem.link import wait_for_port
from drsftp.netem.plan import topology_plan, two_node_plan
from drsftp.netem.spec import LinkSpec
from drsftp.netem.topology import Topology
from drsftp.netem.topospec import Edge, TopologySpec, parse_edge

TARGET = ["client-a:rtt=5ms,rate=0", "client-b:rtt=5ms,rate=0", "a-b:rtt=100ms,rate=1gbit"]


def _name() -> str:
    return "tp" + secrets.token_hex(3)  # 8 characters: parallel runs never collide


def _leftovers(name: str) -> list[str]:
    """Whatever of a link or topology is still there: namespaces, root-namespace devices, the state file."""
    state = nsmod.Names(name).state_file
    return nsmod.link_namespaces(name) + nsmod.link_devices(name) + [state] * os.path.exists(state)


# -- the spec, the plan: no devices ------------------------------------------------------

def test_link_specs_parse_into_edges():
    e = parse_edge("a-b:rtt=100ms,rate=1gbit,loss=0.1%,queue=500,jitter=1ms")
    assert (e.a, e.b, e.label) == ("a", "b", "a-b")
    assert e.spec == LinkSpec(rtt=0.1, rate=1e9, loss=0.001, queue=500, jitter=0.001)
    assert parse_edge(" client - n_2 : rate=0 , rtt=5ms ").spec == LinkSpec(rtt=0.005, rate=0)
    topo = TopologySpec(links=tuple(parse_edge(t) for t in TARGET), sysctls={"net.ipv4.tcp_congestion_control": "reno"},
                        seed=3).validate()
    assert topo.nodes == ["client", "a", "b"]  # in the order first named
    assert TopologySpec.from_dict(json.loads(json.dumps(topo.as_dict()))) == topo


@pytest.mark.parametrize("text,message", [
    ("a-b", "--link wants NODE-NODE:rtt=R,rate=B"),
    ("ab:rtt=1ms,rate=0", "--link wants NODE-NODE"),
    ("a-b-c:rtt=1ms,rate=0", "--link wants NODE-NODE"),
    ("a-b:rtt=5ms", "link a-b: rate must be given (rate=0 for unlimited)"),
    ("a-b:rate=0", "link a-b: rtt must be given"),
    ("A-b:rtt=1ms,rate=0", "node name must be a lower-case letter"),
    ("1a-b:rtt=1ms,rate=0", "node name must be a lower-case letter"),
    ("a-" + "b" * 13 + ":rtt=1ms,rate=0", "node name must be"),
    ("a-a:rtt=1ms,rate=0", "link a-a joins a node to itself"),
    ("a-b:rtt=1ms,rate=0,mtu=9000", "link a-b: unknown setting 'mtu'"),
    ("a-b:rtt=1ms,rate=0,rtt=2ms", "link a-b: rtt is given twice"),
    ("a-b:rtt=1ms,rate=0,", "link a-b: each setting is key=value"),
    ("a-b:rtt=1ms,rate=0,queue=1.5", "link a-b: queue must be a whole number of packets"),
    ("a-b:rtt=1ms,rate=0,queue=0", "link a-b: queue must be 1..1000000 packets"),
    ("a-b:rtt=-1ms,rate=0", "link a-b: not a duration"),
    ("a-b:rtt=1ms,rate=5", "link a-b: rate must be at least 10 kbit/s"),
    ("a-b:rtt=1ms,rate=0,loss=101%", "link a-b: loss must lie between 0 and 100%"),
    ("a-b:rtt=1ms,rate=0,jitter=1ms", "link a-b: jitter must be >= 0 and at most half the RTT"),
])
def test_bad_link_specs_are_one_sentence(text, message):
    with pytest.raises(NetemUsageError) as exc:
        parse_edge(text)
    assert str(exc.value).startswith(message) and "\n" not in str(exc.value)


def test_bad_topologies_are_refused():
    ab = parse_edge("a-b:rtt=1ms,rate=0")
    for links, message in (((), "at least one --link"),
                           ((ab, parse_edge("b-a:rtt=2ms,rate=0")), "nodes b and a are linked twice"),
                           ((Edge("a", "B", LinkSpec()),), "node name must be")):
        with pytest.raises(NetemUsageError, match=message):
            TopologySpec(links=links).validate()
    with pytest.raises(NetemUsageError, match="only net"):
        TopologySpec(links=(ab,), sysctls={"kernel.panic": "1"}).validate()
    with pytest.raises(NetemUsageError, match="backend"):
        TopologySpec(links=(ab,), backend="ns3").validate()
    many = tuple(parse_edge(f"n{i}-n{i + 1}:rtt=1ms,rate=0") for i in range(257))
    with pytest.raises(NetemUsageError, match="at most 256 links"):
        TopologySpec(links=many).validate()


def test_the_plan_names_and_addresses_every_end():
    topo = TopologySpec(links=tuple(parse_edge(t) for t in [*TARGET, "b-d:rtt=1ms,rate=0"])).validate()
    plan = topology_plan("abcd1234", topo)
    assert plan.nodes == {"client": "drs-abcd1234-client", "a": "drs-abcd1234-a", "b": "drs-abcd1234-b",
                          "d": "drs-abcd1234-d"}
    # link K (from 0) is 10.202.K.1 at its first node, .2 at its second
    assert plan.addr("a", "client") == "10.202.0.2" and plan.addr("client", "a") == "10.202.0.1"
    assert plan.addr("b", "a") == "10.202.2.2" and plan.addr("a", "b") == "10.202.2.1"
    assert plan.addr("d", "b") == "10.202.3.2"
    assert plan.addr("d", "client") is None and plan.addr("a", "d") is None  # not neighbours
    assert plan.node_addrs == {"client": "10.203.0.1", "a": "10.203.0.2", "b": "10.203.0.3", "d": "10.203.0.4"}
    devices = [end.dev for wire in plan.wires for end in wire.ends]
    assert len(set(devices)) == 8 and max(map(len, devices)) <= 15  # IFNAMSIZ
    assert plan.wires[2].directions == ("a>b", "b>a")
    assert plan.node_entries()["b"]["addresses"] == {"client": "10.202.1.2", "a": "10.202.2.2", "d": "10.202.3.1"}
    assert all(nsmod.NS_RE.match(ns).group(1) == "abcd1234" for ns in plan.nodes.values())
    # the two-node form keeps its names, addresses and direction labels
    two = two_node_plan("wan", LinkSpec())
    (wire,) = two.wires
    assert [(e.ns, e.dev, e.addr) for e in wire.ends] == [("drs-wan-c", "drswanc", "10.201.0.1"),
                                                           ("drs-wan-s", "drswans", "10.201.0.2")]
    assert wire.directions == ("c2s", "s2c") and two.node_addrs == {}
    assert two.node_entries()["client"]["addresses"] == {"server": "10.201.0.1"}


def test_tc_backend_makes_one_veth_and_two_qdiscs_per_link(monkeypatch):
    """tc cannot run on these machines (no sch_netem): the commands are recorded."""
    from drsftp.netem import owner as owner_mod

    calls = []

    class Done:
        returncode, stdout, stderr = 0, "", ""

    monkeypatch.setattr(owner_mod, "run", lambda args, check=True: calls.append(args) or Done())
    topo = TopologySpec(links=tuple(parse_edge(t) for t in TARGET), backend="tc").validate()
    owner = owner_mod.LinkOwner("tctopo", topo)
    owner._build_tc()
    owner._route_node_addresses()
    veths = [c for c in calls if c[:3] == ["ip", "link", "add"]]
    assert len(veths) == 3 and all("veth" in v for v in veths)
    assert "gso_max_segs" not in veths[0] and "gso_max_segs" in veths[2]  # only the rate-limited link counts packets
    qdiscs = {(c[2], c[6]): c[c.index("netem") + 1:] for c in calls if c[0] == "tc"}
    assert len(qdiscs) == 6  # each end's egress: each direction its own
    assert qdiscs[("drs-tctopo-a", "drstctopo02a")][2:4] == ["delay", "50000us"]  # a-b: 100 ms split
    assert qdiscs[("drs-tctopo-b", "drstctopo02b")][-3:] == ["rate", "1000000000bit", "-14"]
    assert qdiscs[("drs-tctopo-client", "drstctopo00a")][2:4] == ["delay", "2500us"]
    assert ["ip", "-n", "drs-tctopo-a", "neigh", "replace", "10.202.2.2", "lladdr", "02:d5:01:00:02:02", "dev",
            "drstctopo02a", "nud", "permanent"] in calls
    # the neighbour's own address over their link, through the neighbour's end (which has a static entry)
    assert ["ip", "-n", "drs-tctopo-a", "route", "add", "10.203.0.3/32", "via", "10.202.2.2", "dev",
            "drstctopo02a", "src", "10.203.0.2"] in calls


@pytest.fixture
def no_network(monkeypatch):
    """netem whose owner, namespaces and removals fail the test if reached."""
    from drsftp.netem import cli as netem_cli

    def reached(*a, **k):
        raise AssertionError("a bad command line reached the namespaces")

    monkeypatch.setattr(netem_cli, "start_owner", reached)
    for name in ("remove_link", "our_links_on_host", "list_namespaces", "require_root"):
        monkeypatch.setattr(nsmod, name, reached)


@pytest.mark.parametrize("argv,message", [
    (["--link", "a-b:rtt=1ms"], "link a-b: rate must be given (rate=0 for unlimited)"),
    (["--link", "a-b:rtt=1ms,rate=0", "--rtt", "5ms", "--loss", "1%"],
     "with --link each link carries its own settings: drop --rtt, --loss"),
    (["--link", "a-b:rtt=1ms,rate=0", "--link", "b-a:rtt=1ms,rate=0"], "nodes b and a are linked twice"),
    (["--link", "a-B:rtt=1ms,rate=0"], "node name must be a lower-case letter followed by up to 11 lower-case "
                                        "letters, digits or underscores, not 'B'"),
    (["--link", "a-b:rtt=1ms,rate=0", "--sysctl", "kernel.panic=1"], "sysctl 'kernel.panic': only net.* keys "
                                                                      "may be set per side"),
])
def test_cli_usage_errors_exit_2_before_any_namespace(argv, message, no_network, capsys):
    from drsftp.cli import main

    assert main(["netem", "up", "topo", *argv]) == 2
    assert capsys.readouterr().err == f"drsftp: error: {message}\n"


# -- live: namespaces, TUN or veth, the owner --------------------------------------------

def _ping_min(run, addr: str, count: int = 5) -> float:
    """The fastest of ``count`` replies, in seconds: the emulated delay is the floor every reply sees."""
    r = run(["ping", "-c", str(count), "-i", "0.05", "-W", "2", addr])
    assert r.returncode == 0, r.stdout + r.stderr
    return min(float(x) for x in re.findall(r"time=([\d.]+) ms", r.stdout)) / 1000


CONNECT = ("import socket, sys, time\n"
           "t = time.monotonic(); s = socket.create_connection((sys.argv[1], 5999), timeout=5)\n"
           "print(time.monotonic() - t)\n")
LISTEN = "import socket, sys\nl = socket.create_server((sys.argv[1], 5999))\nprint('up', flush=True)\nl.accept()\n"


@pytest.mark.root
def test_cli_topology_up_json_reach_exec_status_down():
    name = _name()
    # the target topology, and d linked to b only: a node that is nobody else's neighbour
    links = [*TARGET, "b-d:rtt=2ms,rate=0"]
    r = drsftp("netem", "up", name, *[a for link in links for a in ("--link", link)], "--cc", "reno", "--json",
               timeout=60)
    assert r.returncode == 0, r.stderr
    try:
        info = json.loads(r.stdout)
        nodes = info["nodes"]
        assert set(nodes) == {"client", "a", "b", "d"} and info["kind"] == "topology"
        assert nodes["a"]["addresses"] == {"client": "10.202.0.2", "b": "10.202.2.1"}
        assert nodes["b"]["addresses"] == {"client": "10.202.1.2", "a": "10.202.2.2", "d": "10.202.3.1"}
        assert all(n["sysctls"]["net.ipv4.tcp_congestion_control"] == "reno" for n in nodes.values())

        def on(node):
            return lambda argv: drsftp("netem", "exec", name, node, "--", *argv, timeout=30)

        # each link its own delay: the floor is the link's RTT, a little above at most
        near = _ping_min(on("client"), nodes["a"]["addresses"]["client"])
        far = _ping_min(on("a"), nodes["b"]["addresses"]["a"])
        assert 0.005 <= near < 0.015 and 0.1 <= far < 0.115, (near, far)
        assert 0.005 <= _ping_min(on("b"), nodes["client"]["addresses"]["b"]) < 0.015
        # TCP to a neighbour's own (loopback) address, over their link: one RTT to connect
        server = subprocess.Popen(nsmod.ns_exec_prefix(nodes["b"]["namespace"])
                                  + [sys.executable, "-c", LISTEN, nodes["b"]["address"]],
                                  stdout=subprocess.PIPE, text=True)
        try:
            assert server.stdout.readline() == "up\n"
            c = on("a")([sys.executable, "-c", CONNECT, nodes["b"]["address"]])
            assert c.returncode == 0, c.stderr
            assert 0.1 <= float(c.stdout) < 0.2
        finally:
            server.kill()
            server.wait()
        # only direct neighbours: no route to d from client or a, whichever of d's addresses
        for node in ("client", "a"):
            for addr in (nodes["d"]["addresses"]["b"], nodes["d"]["address"]):
                u = on(node)(["ping", "-c", "1", "-W", "1", addr])
                assert u.returncode != 0 and "unreachable" in u.stdout + u.stderr, (node, addr, u.stdout)
        # and b forwards nothing, even where client routes d's address through it
        client_ns = nodes["client"]["namespace"]
        nsmod.run(["ip", "-n", client_ns, "route", "add", nodes["d"]["addresses"]["b"], "via",
                   nodes["b"]["addresses"]["client"]])
        u = on("client")(["ping", "-c", "2", "-i", "0.2", "-W", "1", nodes["d"]["addresses"]["b"]])
        assert u.returncode != 0 and "100% packet loss" in u.stdout, u.stdout
        # exec: the command's exit status; a node the topology lacks is one sentence
        assert on("d")(["sh", "-c", "exit 7"]).returncode == 7
        bad = on("server")(["true"])
        assert bad.returncode == 1 and bad.stderr.count("\n") == 1 and "has no node 'server'" in bad.stderr
        st = drsftp("netem", "status", "--json")
        (entry,) = [e for e in json.loads(st.stdout) if e["name"] == name]
        assert entry["alive"] and entry["info"]["nodes"] == nodes
        time.sleep(0.7)  # the owner writes counters every 0.5 s
        entry = next(e for e in json.loads(drsftp("netem", "status", "--json").stdout) if e["name"] == name)
        assert entry["stats"]["a>b"]["packets_out"] >= 5 and entry["stats"]["b>a"]["packets_out"] >= 5
        assert entry["stats"]["b>d"]["packets_out"] < 5  # the pings to d never crossed b-d
        text = drsftp("netem", "status").stdout
        assert f"topology {name}: backend" in text and "link a-b: rtt 100 ms, rate 1000 Mbit/s" in text
        pid = info["pid"]
    finally:
        down = drsftp("netem", "down", name)
    assert down.returncode == 0 and name in down.stdout, down.stderr
    assert _leftovers(name) == []
    assert wait_until(lambda: not os.path.exists(f"/proc/{pid}"))  # ended, and reaped by init


@pytest.mark.root
def test_each_link_shapes_its_own_traffic():
    """Two links of different rates carry a bulk TCP transfer each at their own rate."""
    with Topology(["x-y:rtt=10ms,rate=10mbit", "y-z:rtt=10ms,rate=40mbit"],
                  sysctls={"net.ipv4.tcp_congestion_control": "reno"}) as topo:
        got = {}
        for client, server in (("x", "y"), ("z", "y")):
            addr = topo.addr(server, client)
            topo.popen(server, ["iperf3", "-s", "-1", "-B", addr], stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)
            wait_for_port(topo, server, 5201)
            r = topo.run(client, ["iperf3", "-c", addr, "-t", "3", "-O", "1", "-J"], timeout=60)
            got[client] = json.loads(r.stdout)["end"]["sum_received"]["bits_per_second"]
            wait_until(lambda server=server: not topo.run(server, ["ss", "-ltnH", "sport = :5201"],
                                                          timeout=5).stdout.strip())
        # the goodput ceiling is rate x 1448/1500 (docs/NETEM.md); loosely, under a shared machine's load
        assert 0.8 * 9.65e6 <= got["x"] <= 1.02 * 9.65e6, got
        assert 0.8 * 38.6e6 <= got["z"] <= 1.02 * 38.6e6, got
        time.sleep(0.7)
        st = topo.stats()
        assert st["x>y"]["bytes_out"] > 1e6 and st["z>y"]["bytes_out"] > 4e6
        assert st["x>y"]["bytes_out"] < st["z>y"]["bytes_out"]


@pytest.mark.root
def test_api_addresses_children_and_cleanup():
    topo = Topology(TARGET, sysctls={"net.ipv4.tcp_wmem": "4096 16384 8388608"})
    with topo:
        assert topo.nodes == ["client", "a", "b"]
        assert topo.addr("b", "a") == "10.202.2.2" and topo.node_addr("a") == "10.203.0.2"
        with pytest.raises(NetemError, match="no node 'zz'"):
            topo.namespace("zz")
        assert topo.run("b", ["sysctl", "-n", "net.ipv4.tcp_wmem"], timeout=10).stdout.split() == \
            ["4096", "16384", "8388608"]
        assert topo.run("a", ["sysctl", "-n", "net.ipv4.ip_forward"], timeout=10).stdout.strip() == "0"
        child = topo.popen("a", ["sleep", "60"])
        owner = topo.owner_pid
        assert len(_leftovers(topo.name)) == 4  # three namespaces and the state file
    assert _leftovers(topo.name) == [] and child.poll() is not None and not os.path.exists(f"/proc/{owner}")
    with pytest.raises(RuntimeError), Topology(TARGET) as failed:
        raise RuntimeError("boom")
    assert _leftovers(failed.name) == []
    # a failed build (a sysctl the kernel lacks, after every link exists) leaves nothing either
    broken = Topology(TARGET, sysctls={"net.ipv4.drs_no_such_key": "1"})
    with pytest.raises(NetemError, match="drs_no_such_key"):
        broken.up()
    broken.close()
    assert _leftovers(broken.name) == []


@pytest.mark.root
def test_sigterm_sigint_and_kill_9_of_the_owner():
    for sig in (signal.SIGTERM, signal.SIGINT):
        topo = Topology(TARGET).up()
        try:
            assert _leftovers(topo.name)
            os.kill(topo.owner_pid, sig)
            assert wait_until(lambda topo=topo: _leftovers(topo.name) == [], timeout=15), sig
        finally:
            topo.close()
    name = _name()
    r = drsftp("netem", "up", name, "--link", "p-q:rtt=2ms,rate=0", "--link", "q-r:rtt=2ms,rate=0", "--json")
    assert r.returncode == 0, r.stderr
    pid = json.loads(r.stdout)["pid"]
    try:
        os.kill(pid, signal.SIGKILL)
        assert wait_until(lambda: not os.path.exists(f"/proc/{pid}"))
        assert len(nsmod.link_namespaces(name)) == 3  # the crash left them
        assert name in nsmod.our_links_on_host()  # what `down --all` removes
        st = drsftp("netem", "status")
        assert re.search(rf"topology {name}: .*\n(.*\n)*.*crashed", st.stdout), st.stdout
        assert drsftp("netem", "exec", name, "q", "--", "true").returncode == 0  # still usable until down
    finally:
        down = drsftp("netem", "down", name)
    assert down.returncode == 0 and name in down.stdout, down.stderr
    assert _leftovers(name) == []


TERMINATED = ("import signal, sys, time\nsignal.signal(signal.SIGTERM, lambda *a: sys.exit(3))\n"
              "print('up', flush=True)\ntime.sleep(60)\n")


@pytest.mark.root
def test_exec_passes_sigterm_on_to_its_command_and_exits_with_its_status():
    """A supervisor's SIGTERM to `drsftp netem exec` reaches the command in
    the node (a server there stops), and the exec's status is the command's."""
    name = "drs" + secrets.token_hex(2) + "x"
    r = drsftp("netem", "up", name, "--rtt", "2ms", "--rate", "0", timeout=60)
    assert r.returncode == 0, r.stderr
    try:
        ex = subprocess.Popen([sys.executable, "-m", "drsftp", "netem", "exec", name, "server", "--",
                               sys.executable, "-c", TERMINATED], stdout=subprocess.PIPE, text=True)
        try:
            assert ex.stdout.readline() == "up\n"
            ex.send_signal(signal.SIGTERM)
            assert ex.wait(15) == 3
        finally:
            if ex.poll() is None:
                ex.kill()
                ex.wait()
            ex.stdout.close()
    finally:
        drsftp("netem", "down", name)
