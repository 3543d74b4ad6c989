"""The link model and the virtio header arithmetic, without any device."""

import random
import struct

import pytest

from drsftp.netem.errors import NetemError
from drsftp.netem.shaper import Shaper
from drsftp.netem.spec import LinkSpec, parse_duration, parse_loss, parse_rate, parse_sysctl
from drsftp.netem.tun import VNET_HDR_LEN, segments_and_wire_size


def test_rate_and_delay():
    sh = Shaper(rate=8e6, delay=0.05, queue_packets=1000)  # 1 MB/s
    releases = [sh.offer(0.0, 1000) for _ in range(100)]
    assert releases[0] == pytest.approx(0.001 + 0.05)
    assert releases[-1] == pytest.approx(0.1 + 0.05)  # 100 kB at 1 MB/s
    assert releases == sorted(releases)


def test_queue_drops_when_backlog_exceeds_queue():
    sh = Shaper(rate=8e6, delay=0.0, queue_packets=10)  # 15 kB of queue
    out = [sh.offer(0.0, 1500) for _ in range(20)]
    assert sum(r is None for r in out) == 10
    assert sh.stats.queue_drops == 10
    # once drained, it accepts again
    assert sh.offer(1.0, 1500) is not None


def test_loss_is_per_segment_and_statistically_right():
    sh = Shaper(rate=0, delay=0.0, queue_packets=100, loss=0.05, rng=random.Random(1))
    for _ in range(20000):
        sh.offer(0.0, 1500)
    for _ in range(2000):
        sh.offer(0.0, 64000, segments=10)
    st = sh.stats
    frac = st.lost / st.packets_in
    assert st.packets_in == 40000
    assert abs(frac - 0.05) < 4 * (0.05 * 0.95 / 20000) ** 0.5 + 0.003


def test_jitter_never_reorders():
    sh = Shaper(rate=0, delay=0.01, queue_packets=100, jitter=0.005, rng=random.Random(2))
    rel = [sh.offer(i * 0.0001, 100) for i in range(1000)]
    assert rel == sorted(rel)
    assert min(rel) >= 0.005


def _gso_packet(payload, gso_size, ipv6=False):
    if ipv6:
        ip = bytes([0x60]) + bytes(39)
    else:
        ip = bytes([0x45]) + bytes(19)
    tcp = bytes(12) + bytes([0x80]) + bytes(19)  # data offset 8 words = 32 bytes
    hdr = struct.pack("<BBHHHH", 1, 1 if not ipv6 else 4, len(ip) + 32, gso_size, 0, 0)
    return hdr + ip + tcp + bytes(payload)


def test_gso_segments_and_wire_size():
    pkt = _gso_packet(14480, 1448)
    assert segments_and_wire_size(pkt) == (10, 14480 + 10 * 52)
    pkt6 = _gso_packet(2000, 1428, ipv6=True)
    assert segments_and_wire_size(pkt6) == (2, 2000 + 2 * 72)
    plain = bytes(VNET_HDR_LEN) + bytes([0x45]) + bytes(59)
    assert segments_and_wire_size(plain) == (1, 60)


def test_spec_parsing_and_validation():
    assert parse_duration("100ms") == pytest.approx(0.1)
    assert parse_duration("250us") == pytest.approx(250e-6)
    assert parse_rate("1gbit") == 1e9 and parse_rate("100mbit") == 100e6
    assert parse_loss("0.1%") == pytest.approx(0.001)
    assert parse_sysctl('net.ipv4.tcp_wmem="4096 16384 33554432"') == (
        "net.ipv4.tcp_wmem", "4096 16384 33554432")
    assert LinkSpec(rtt=0.1, rate=100e6).queue_packets == 833  # 1 BDP
    for bad in (dict(rtt=-0.1), dict(rate=5), dict(rate=-1), dict(loss=1.5), dict(queue=0),
                dict(backend="x"), dict(jitter=0.2), dict(sysctls={"kernel.foo": "1"}),
                dict(sysctls={"net.ipv4.tcp_congestion_control": "vegas"})):
        with pytest.raises(NetemError):
            LinkSpec(**bad).validate()
    for text, fn in (("fast", parse_duration), ("-5ms", parse_duration), ("lots", parse_rate),
                     ("x%", parse_loss), ("novalue", parse_sysctl)):
        with pytest.raises(NetemError):
            fn(text)


def _capture_owner(monkeypatch, fail_on=None):
    """A LinkOwner whose `ip`/`tc` calls are recorded, not run."""
    from drsftp.netem import owner as owner_mod

    calls = []

    def fake_run(args, check=True):
        calls.append(args)
        if fail_on and fail_on in args:
            raise NetemError("Error: Specified qdisc kind is unknown.")

        class Done:
            returncode, stdout, stderr = 0, "", ""
        return Done()

    monkeypatch.setattr(owner_mod, "run", fake_run)
    return owner_mod, calls


def test_tc_backend_builds_netem_on_both_veth_ends(monkeypatch):
    owner_mod, calls = _capture_owner(monkeypatch)
    spec = LinkSpec(rtt=0.1, rate=100e6, loss=0.001, jitter=0.001, queue=500, backend="tc").validate()
    owner_mod.LinkOwner("tcx", spec)._build_tc()
    (veth,) = [c for c in calls if c[:3] == ["ip", "link", "add"]]
    assert "veth" in veth
    # both ends pass 1500-byte packets to the qdisc, never GSO super-packets
    assert veth.count("gso_max_segs") == 2 and all(veth[i + 1] == "1" for i, w in enumerate(veth)
                                                   if w == "gso_max_segs")
    qdiscs = [c for c in calls if c[0] == "tc"]
    assert len(qdiscs) == 2  # one per direction, on each end
    for q in qdiscs:
        assert q[q.index("netem") - 1] == "root"
        # the queue plus what 51 ms (one way and the jitter) hold at 100 Mbit/s: 425 packets
        assert q[q.index("limit") + 1] == "925"
        assert q[q.index("delay") + 1:q.index("delay") + 3] == ["50000us", "1000us"]  # half the RTT each way
        assert q[q.index("loss") + 1] == "0.100000%"
        assert q[q.index("rate") + 1:q.index("rate") + 3] == ["100000000bit", "-14"]  # IP bytes, as tun charges
    peers = (("c", "10.201.0.2", "02:d5:00:00:00:02"), ("s", "10.201.0.1", "02:d5:00:00:00:01"))
    for side, peer_addr, peer_mac in peers:
        ns = ["ip", "-n", f"drs-tcx-{side}"]
        # no ARP and no IPv6 link-local chatter through the emulated link
        assert ns + ["neigh", "replace", peer_addr, "lladdr", peer_mac, "dev", f"drstcx{side}", "nud",
                     "permanent"] in calls
        assert ns + ["link", "set", "dev", f"drstcx{side}", "addrgenmode", "none"] in calls
    calls.clear()  # neither rate nor loss: nothing counts packets, and GSO carries more
    owner_mod.LinkOwner("tcy", LinkSpec(rtt=0.1, rate=0, backend="tc").validate())._build_tc()
    (veth,) = [c for c in calls if c[:3] == ["ip", "link", "add"]]
    assert "gso_max_segs" not in veth


def test_tc_limit_is_the_queue_plus_the_delay_line():
    from drsftp.netem.tcnetem import netem_args, netem_limit

    def args(**kw):
        return netem_args(LinkSpec(**kw).validate())

    # 30 Mbit/s, 25 ms each way: 62.5 packets in flight, the queue 1 BDP (125)
    assert netem_limit(LinkSpec(rtt=0.05, rate=30e6).validate()) == 125 + 63
    assert netem_limit(LinkSpec(rtt=0.05, rate=30e6, queue=20).validate()) == 20 + 63
    assert netem_limit(LinkSpec(rtt=0.0, rate=30e6, queue=20).validate()) == 20
    assert args(rtt=0.05, rate=0)[:2] == ["limit", "1000000"]  # no bottleneck, no queue to hold
    assert "rate" not in args(rtt=0.05, rate=0) and "loss" not in args(rtt=0.05, rate=0)
    # jitter without a rate: a rate no link reaches keeps netem's releases in order
    jittered = args(rtt=0.05, rate=0, jitter=0.005)
    assert jittered[jittered.index("rate") + 1] == "100000000000bit"


QDISC_SHOW = """qdisc netem 8001: root refcnt 3 limit 188 delay 25ms rate 30Mbit packetoverhead -14
 Sent 30039262 bytes 19873 pkt (dropped 91, overlimits 0 requeues 0) 
 backlog 136456b 49p requeues 0
"""  # noqa: W291 (tc ends the counter line with a space)


def test_tc_counters_parse_and_map_onto_the_tun_backends():
    from drsftp.netem.tcnetem import direction_stats, parse_qdisc_stats

    c = parse_qdisc_stats("qdisc noqueue 0: dev lo root refcnt 2\n Sent 0 bytes 0 pkt (dropped 0, overlimits 0 "
                          "requeues 0)\n backlog 0b 0p requeues 0\n" + QDISC_SHOW)
    assert c == {"bytes": 30039262, "packets": 19873, "dropped": 91, "backlog_bytes": 136456, "backlog_packets": 49}
    assert parse_qdisc_stats(QDISC_SHOW.replace("136456b", "133.3Kb"))["backlog_bytes"] == 136499
    assert parse_qdisc_stats("qdisc noqueue 0: dev lo root refcnt 2\n") is None
    d = direction_stats(c, loss=0, rate=30e6)
    assert (d["lost"], d["queue_drops"], d["dropped"]) == (0, 91, 91)
    assert d["packets_in"] == 19873 + 91 + 49 and d["packets_out"] == 19873
    assert d["bytes_out"] == 30039262 - 14 * 19873  # IP bytes: the veth's Ethernet headers off
    assert (direction_stats(c, loss=0.01, rate=0)["lost"], direction_stats(c, loss=0.01, rate=0)["queue_drops"]) \
        == (91, 0)
    both = direction_stats(c, loss=0.01, rate=30e6)
    assert both["lost"] is None and both["queue_drops"] is None and both["dropped"] == 91


def test_status_names_tc_drops_it_cannot_split():
    from drsftp.netem.cli import direction_counters

    split = {"packets_in": 10, "lost": 1, "queue_drops": 2, "bytes_out": 900}
    assert direction_counters(split) == "10 packets in, 1 lost, 2 queue drops, 900 bytes out"
    joint = {"packets_in": 10, "lost": None, "queue_drops": None, "dropped": 3, "bytes_out": 900}
    assert direction_counters(joint) == "10 packets in, 3 dropped (loss and queue together), 900 bytes out"


def test_auto_falls_back_to_tun_and_explicit_tc_fails_clearly(monkeypatch, tmp_path):
    from drsftp.netem import namespaces as nsmod

    owner_mod, calls = _capture_owner(monkeypatch, fail_on="netem")
    monkeypatch.setattr(nsmod, "require_root", lambda: None)
    monkeypatch.setattr(nsmod, "list_namespaces", lambda: [])
    monkeypatch.setattr(nsmod, "read_state", lambda name: None)
    monkeypatch.setattr(nsmod, "read_sysctls", lambda ns, keys: {})
    monkeypatch.setattr(nsmod, "STATE_DIR", str(tmp_path))
    built = []
    monkeypatch.setattr(owner_mod.LinkOwner, "_build_tun", lambda self: built.append("tun"))
    o = owner_mod.LinkOwner("tca", LinkSpec(backend="auto").validate())
    assert o.build()["backend"] == "tun"
    assert built == ["tun"]
    assert any(c[:3] == ["ip", "-n", "drs-tca-c"] and "delete" in c for c in calls)  # half-made veth undone
    o = owner_mod.LinkOwner("tcb", LinkSpec(backend="tc").validate())
    with pytest.raises(NetemError, match="tc backend unavailable"):
        o.build()


def test_nan_and_infinity_are_refused_where_a_comparison_would_let_them_pass():
    nan, inf = float("nan"), float("inf")
    for bad in (dict(rate=nan), dict(jitter=nan), dict(rtt=nan), dict(loss=nan), dict(rate=inf), dict(rtt=inf),
                dict(queue=1.5), dict(queue=True)):
        with pytest.raises(NetemError, match="must be"):
            LinkSpec(**bad).validate()
    for text, fn in (("nan", parse_loss), ("inf", parse_loss), ("-0.1", parse_loss), ("200%", parse_loss),
                     ("9" * 400, parse_duration), ("9" * 400, parse_rate)):
        with pytest.raises(NetemError):
            fn(text)
    assert parse_loss("100%") == 1.0 and parse_loss("0") == 0.0


@pytest.fixture
def no_link(monkeypatch):
    """netem whose owner, namespaces and removals fail the test if reached."""
    from drsftp.netem import cli as netem_cli
    from drsftp.netem import namespaces as nsmod

    def reached(*a, **k):
        raise AssertionError("a bad command line reached the namespaces")

    monkeypatch.setattr(netem_cli, "start_owner", reached)
    for name in ("remove_link", "our_links_on_host", "list_namespaces", "require_root"):
        monkeypatch.setattr(nsmod, name, reached)


@pytest.mark.parametrize("argv,message", [
    (["down", "lan", "--all"], "give a link name or --all, not both"),
    (["down"], "give a link name or --all"),
    (["down", "Bad"], "link name must be 1-8 lower-case letters or digits, not 'Bad'"),
    (["up", "lan", "--loss", "200%"], "loss must lie between 0 and 100%, not 200%"),
    (["up", "lan", "--loss", "nan"], "not a loss rate: 'nan' (examples: 0.1%, 0.001)"),
    (["up", "lan", "--rtt", "1ms", "--jitter", "1ms"], "jitter must be >= 0 and at most half the RTT"),
    (["up", "lan", "--queue", "0"], "queue must be 1..1000000 packets, not 0"),
    (["up", "lan", "--sysctl", "novalue"], "--sysctl wants key=value, not 'novalue'"),
    (["exec", "lan", "client"], "exec needs a command after --"),
])
def test_netem_usage_errors_exit_2_before_any_namespace(argv, message, no_link, capsys):
    from drsftp.cli import main

    assert main(["netem", *argv]) == 2
    assert capsys.readouterr().err == f"drsftp: error: {message}\n"
