"""`drsftp bench compete`: the SPEC grammar, the figures (Jain's index,
goodput each second, the papers' memory measure, link use), which sockets
are a flow's, the command line and `drsftp benchreport` of the results."""

import json
import os

import pytest
from conftest import Reached, stop_at_run, usage_exit

from drsftp.bench.common import tunings as T
from drsftp.bench.common.sampler import parse_ss
from drsftp.bench.compete import outputs as compete
from drsftp.bench.compete import run as competerun
from drsftp.bench.compete.report import cap_points, flow_table, kind_table, markdown, slug
from drsftp.bench.compete.spec import parse_compete, window_cap
from drsftp.bench.compete.stats import cumulative_at, flow_figures, jain, per_second, summary
from drsftp.cli import main

# ---------------------------------------------------------------- the grammar


def test_a_spec_gives_each_flow_its_kind_number_and_delay():
    flows = parse_compete("10*stock-64k+1*drs:1MiB+drs-P-auto@10s+2*iperf3@500ms")
    assert len(flows) == 14
    assert [f.index for f in flows] == list(range(14))
    assert flows[0].label == "stock-64k#1" and flows[9].label == "stock-64k#10"
    assert (flows[10].kind, flows[10].name, flows[10].arg, flows[10].delay) == ("drs:1MiB", "drs", "1MiB", 0.0)
    assert (flows[11].family, flows[11].streams, flows[11].delay) == ("parallel", "auto", 10.0)
    assert [(f.label, f.family, f.delay) for f in flows[12:]] == [("iperf3#1", "iperf3", 0.5),
                                                                  ("iperf3#2", "iperf3", 0.5)]
    assert window_cap("drs:1MiB") == 1 << 20 and window_cap("fixed:1MiB") is None and window_cap("drs") is None


def test_gridftp_runs_n_streams_from_its_own_server_and_ends_at_its_cap(tmp_path):
    from drsftp.bench.compete.run import CompeteConfig, _launch

    class Link:
        server_addr, client_addr = "10.201.0.2", "10.201.0.1"

    flows = parse_compete("gridftp-p4+gridftp-p8@1s")
    assert [(f.family, f.streams, f.label) for f in flows] == [("gridftp", "4", "gridftp-p4#1"),
                                                                ("gridftp", "8", "gridftp-p8#1")]
    cfg = CompeteConfig(spec="x", flows=flows, path=T.Path(rate=1e9, rtt=0.1), duration=30.0)
    got = [_launch(cfg, Link(), f, str(tmp_path / "root"), str(tmp_path), str(tmp_path), None, {}) for f in flows]
    (server4, w4, port4), (server8, _, port8) = got
    assert port4 == port8 == 2811 and server4 == server8  # one server for both
    assert "/usr/sbin/globus-gridftp-server" in server4 and w4.kind == "gridftp"
    guc = w4.client[w4.client.index("globus-url-copy"):]
    assert guc[1:5] == ["-p", "4", "-tcp-bs", str(2 * cfg.path.bdp // 4)]
    assert guc[5] == f"ftp://10.201.0.2:2811{tmp_path}/root/big.bin" and guc[6].startswith("file://")
    assert w4.client[0] == "unshare"  # a hosts file of its own (field.py)
    assert not w4.is_data({"local": "10.201.0.1:40000", "peer": "10.201.0.2:2811"})
    assert w4.is_data({"local": "10.201.0.1:40001", "peer": "10.201.0.2:50000"})
    w4.start_s = 0.0
    assert w4.deadline(cfg) == 30.0  # no time limit of its own: ended at its cap, not past it


def test_every_tuning_of_the_bench_and_the_other_kinds_parse():
    spec = "+".join([*T.TUNINGS, "fixed:64k", "drs-closed:4MiB", "drs-P-4", " 2 * drs @ 1s "])
    flows = parse_compete(spec)
    assert [f.kind for f in flows] == [*T.TUNINGS, "fixed:64k", "drs-closed:4MiB", "drs-P-4", "drs", "drs"]
    assert flows[-1].delay == 1.0 and flows[-3].streams == "4"


@pytest.mark.parametrize("spec,message", [
    ("", "the spec is empty (e.g. 10*stock-64k+1*drs)"),
    ("drs+", "an empty flow between two '+'"),
    ("x*drs", "'x*drs' is not [N*]KIND[@DELAY] (e.g. 10*stock-64k, drs@5s)"),
    ("2*3*drs", "'2*3*drs' is not [N*]KIND[@DELAY] (e.g. 10*stock-64k, drs@5s)"),
    ("0*drs", "'0*drs': the count of flows must be at least 1"),
    ("65*drs", "at most 64 flows share the link"),
    ("60*drs+5*kernel", "at most 64 flows share the link"),
    ("3*bogus", "'3*bogus': unknown kind 'bogus'; choose from " + ", ".join(
        [*T.TUNINGS, "fixed:SIZE", "drs:CAP", "drs-P-N", "drs-P-auto", "gridftp-pN", "iperf3", "iperf3:SIZE"])),
    ("stock-64k:1M", "'stock-64k:1M': stock-64k takes no :ARG (for other static sizes use fixed:SIZE)"),
    ("kernel:3", "'kernel:3': kernel takes no :ARG"),
    ("fixed", "'fixed': fixed needs its size: fixed:SIZE (e.g. fixed:64k)"),
    ("drs:", "'drs:': the argument after ':' is missing (e.g. drs:4MiB, fixed:64k)"),
    ("drs:0", "'drs:0': size must be positive: '0'"),
    ("drs:2GiB", "'drs:2GiB': a socket buffer holds at most 1 GiB, not '2GiB'"),
    ("drs-P-0", "'drs-P-0': drs-P-N takes 1-64 streams or auto (drs-P-4, drs-P-auto)"),
    ("drs-P-65", "'drs-P-65': drs-P-N takes 1-64 streams or auto (drs-P-4, drs-P-auto)"),
    ("drs-P-auto:1M", "'drs-P-auto:1M': drs-P-auto takes no :ARG (its streams run drs)"),
    ("gridftp-p0", "'gridftp-p0': gridftp-pN takes 1-64 streams and no :ARG (gridftp-p4, gridftp-p8)"),
    ("gridftp-pauto", "'gridftp-pauto': gridftp-pN takes 1-64 streams and no :ARG (gridftp-p4, gridftp-p8)"),
    ("gridftp-p4:1M", "'gridftp-p4:1M': gridftp-pN takes 1-64 streams and no :ARG (gridftp-p4, gridftp-p8)"),
    ("iperf3:0", "'iperf3:0': iperf3:SIZE takes a buffer size up to 1 GiB (iperf3:4MiB), not '0'"),
    ("iperf3:big", "'iperf3:big': iperf3:SIZE takes a buffer size up to 1 GiB (iperf3:4MiB), not 'big'"),
    ("iperf3:2GiB", "'iperf3:2GiB': iperf3:SIZE takes a buffer size up to 1 GiB (iperf3:4MiB), not '2GiB'"),
    ("drs@soon", "'drs@soon': not a duration: 'soon' (examples: 100ms, 0.5ms, 1s)"),
    ("drs@4000", "'drs@4000': a flow starts at most 3600 s after the first"),
])
def test_a_bad_spec_is_one_sentence(spec, message):
    with pytest.raises(ValueError) as got:
        parse_compete(spec)
    assert str(got.value) == message


# ---------------------------------------------------------------- the figures


def test_jain_is_one_for_equal_shares_and_one_over_n_for_a_hog():
    assert jain([5.0, 5.0, 5.0]) == pytest.approx(1.0)
    assert jain([9.0, 0.0, 0.0]) == pytest.approx(1 / 3)
    assert jain([1.0, 2.0, 3.0]) == pytest.approx(36 / 42)
    assert jain([7.0]) == pytest.approx(1.0)
    assert jain([]) is None and jain([0.0, 0.0]) is None


def test_goodput_each_second_interpolates_between_samples_and_weighs_the_last_part_second():
    pts = [(0.0, 0.0), (0.5, 0.0), (2.5, 2_000_000.0)]  # 1 MB/s from 0.5 s to 2.5 s
    assert cumulative_at(pts, 1.5) == pytest.approx(1_000_000)
    assert cumulative_at(pts, 9.0) == 2_000_000 and cumulative_at(pts, -1.0) == 0.0
    assert per_second(pts, 3.0) == pytest.approx([4.0, 8.0, 4.0])
    # the competition ends at 2.25 s: its last second is a quarter long, at the same rate
    assert per_second(pts, 2.25) == pytest.approx([4.0, 8.0, 8.0])


def _flow(label, kind, rate_bps, rcvbuf, start=0.0, end=4.0, client_bytes=None, error=None, every=0.25):
    """A flow's record as the runner makes it: bytes from its first sample at rate_bps, its buffer flat."""
    samples = []
    t = start + 0.5
    while t <= end:
        samples.append({"t": t, "bytes": int((t - start - 0.5) * rate_bps / 8) + 1000, "rcvbuf": rcvbuf,
                        "sndbuf": rcvbuf // 2, "sockets": 1, "retrans": 3, "snd_wnd": rcvbuf // 2,
                        "inflight": rcvbuf // 4})
        t += every
    rec = {"index": 0, "kind": kind, "label": label, "delay_s": start, "start_s": start, "end_s": end,
           "client_bytes": client_bytes, "error": error, "samples": samples}
    rec.update(flow_figures(rec, end))
    return rec


def test_a_flow_is_timed_from_its_first_byte_and_counts_its_clients_bytes_past_the_last_sample():
    f = _flow("drs#1", "drs", 8e6, 1 << 20, start=1.0, end=5.0, client_bytes=4_200_000)
    assert f["first_byte_s"] == 1.5 and f["seconds"] == 3.5
    assert f["bytes"] == 4_200_000 and f["mbps"] == pytest.approx(4_200_000 * 8 / 3.5 / 1e6, abs=1e-3)
    assert f["rcvbuf_mean"] == f["rcvbuf_peak"] == 1 << 20 and f["sndbuf_mean"] == 1 << 19
    assert f["retransmits"] == 3
    assert (f["wnd_mean"], f["wnd_peak"], f["inflight_mean"], f["inflight_peak"]) == (1 << 19, 1 << 19, 1 << 18,
                                                                                      1 << 18)
    assert len(f["per_second"]) == 5 and f["per_second"][0] == 0.0  # nothing before its start
    # every byte is in some second: the seconds add up to the total
    assert sum(f["per_second"]) * 1e6 / 8 == pytest.approx(4_200_000, rel=1e-3)
    fewer = _flow("drs#1", "drs", 8e6, 1 << 20, start=1.0, end=5.0, client_bytes=10)
    assert fewer["bytes"] == max(s["bytes"] for s in fewer["samples"])  # the client's own count is never less


def test_flows_started_apart_are_judged_while_all_run_and_by_how_soon_they_share_equally():
    from drsftp.bench.compete.stats import overlap_fairness

    def flow(label, first, end, per_second):
        pts = [(first, 0.0)]
        for k, r in enumerate(per_second):
            pts.append((k + 1.0, pts[-1][1] + r * 1e6 / 8 * ((k + 1.0) - max(k, first))))
        return {"label": label, "first_byte_s": first, "end_s": end, "per_second": per_second, "start_s": first,
                "samples": [{"t": t, "bytes": b} for t, b in pts[1:]]}

    a = flow("a", 0.0, 12.0, [900] * 4 + [800, 700, 600] + [500] * 5)
    b = flow("b", 4.0, 12.0, [0] * 4 + [100, 200, 300] + [500] * 5)
    got = overlap_fairness([a, b], ceiling_mbps=1000.0)
    assert (got["from_s"], got["to_s"]) == (4.0, 12.0)
    assert got["jain_per_second"] == [0.6231, 0.7642, 0.9] + [1.0] * 5  # 800:100, 700:200, 600:300, equal
    # 5-s windows: [4, 9) 3100:1600, Jain 0.908; [5, 10) 2800:2000, 0.973: 6 s after the last start
    assert got["reached_s"] == 6 and got["jain"] == pytest.approx(0.963, abs=0.001)  # 4600:3100 over [4, 12)
    # shares while both ran, not over a's first 4 s alone (900 Mbit/s): 4600 and 3100 Mbit over 8 s
    assert got["mbps"] == pytest.approx({"a": 575.0, "b": 387.5}) and got["link_use"] == pytest.approx(0.9625)
    assert overlap_fairness([a, b])["link_use"] is None  # no ceiling given
    assert overlap_fairness([a]) is None and overlap_fairness([a, {**b, "end_s": None}]) is None


def test_the_papers_example_is_perfectly_fair_by_memory():
    """Simulation study, section III.D: 5 flows allot 1 MiB, 5 allot 64 KiB;
    each gets bandwidth in proportion: 16 times as much."""
    flows = [_flow(f"drs#{i}", "drs", 16e6, 1 << 20) for i in range(5)]
    flows += [_flow(f"stock-64k#{i}", "stock-64k", 1e6, 64 << 10) for i in range(5)]
    s = summary(flows, ceiling_mbps=100.0)
    assert s["jain_per_memory"] == pytest.approx(1.0, abs=1e-3)
    assert all(f["fair_ratio"] == pytest.approx(1.0, abs=0.01) for f in s["flows"])
    assert s["jain_all"] < 0.6  # by goodput alone, far from equal
    kinds = {k["kind"]: k for k in s["kinds"]}
    assert kinds["drs"]["jain"] == pytest.approx(1.0) and kinds["drs"]["flows"] == 5
    assert kinds["drs"]["share"] == pytest.approx(16 / 17, abs=0.01)
    assert kinds["stock-64k"]["bps_per_byte"] == pytest.approx(kinds["drs"]["bps_per_byte"], rel=0.01)


def test_a_hog_within_a_kind_lowers_its_jain_and_its_fair_ratio_shows():
    flows = [_flow("drs#1", "drs", 30e6, 1 << 20), _flow("drs#2", "drs", 10e6, 1 << 20)]
    s = summary(flows, ceiling_mbps=100.0)
    assert s["kinds"][0]["jain"] == pytest.approx(jain([flows[0]["mbps"], flows[1]["mbps"]]), abs=1e-4)
    assert s["kinds"][0]["jain"] < 0.9
    ratios = [f["fair_ratio"] for f in s["flows"]]
    assert ratios[0] > 1 > ratios[1]


def test_link_use_is_the_bytes_over_what_the_ceiling_carries_from_the_first_byte_to_the_last_end():
    flows = [_flow("a#1", "a", 40e6, 1 << 20, start=0.0, end=4.0), _flow("b#1", "b", 40e6, 1 << 20, start=2.0,
                                                                          end=6.0)]
    s = summary(flows, ceiling_mbps=100.0)
    moved = sum(f["bytes"] for f in flows) * 8 / 1e6
    assert s["link_use"] == pytest.approx(moved / (100.0 * (6.0 - 0.5)), abs=1e-3)
    assert len(s["link_use_per_second"]) == 6
    assert s["link_use_per_second"][3] == pytest.approx(0.8, abs=0.02)  # both flows at 40 of 100


# ---------------------------------------------------------------- a flow's sockets

CLIENT_SS = """0 0 10.201.0.1:40001 10.201.0.2:2121 users:(("python",pid=111,fd=5))
\t skmem:(r0,rb131072,t0,tb87040,f0,w0,o0,bl0,d0) bytes_received:900
0 0 10.201.0.1:40002 10.201.0.2:50001 users:(("python",pid=111,fd=7))
\t skmem:(r1000,rb131072,t0,tb87040,f0,w0,o0,bl0,d0) bytes_received:500000
0 0 10.201.0.1:40003 10.201.0.2:50002 users:(("python",pid=222,fd=7))
\t skmem:(r0,rb2097152,t0,tb87040,f0,w0,o0,bl0,d0) bytes_received:800000
0 0 10.201.0.1:20002 10.201.0.2:5203 users:(("iperf3",pid=333,fd=5))
\t skmem:(r0,rb6291456,t0,tb87040,f0,w0,o0,bl0,d0) bytes_received:700000
0 0 10.201.0.1:40009 10.201.0.2:5203 users:(("iperf3",pid=333,fd=4))
\t skmem:(r0,rb131072,t0,tb87040,f0,w0,o0,bl0,d0) bytes_received:300
"""
SERVER_SS = """0 0 10.201.0.2:50001 10.201.0.1:40002
\t skmem:(r0,rb131072,t0,tb262144,f0,w120000,o0,bl0,d0) rtt:20.5/1 mss:1448 cwnd:10 retrans:0/7 bytes_acked:500000 \
unacked:4 snd_wnd:65536
0 0 10.201.0.2:2121 10.201.0.1:40001
\t skmem:(r0,rb131072,t0,tb46080,f0,w0,o0,bl0,d0) rtt:20.1/1
"""


def test_ss_with_processes_gives_each_socket_its_pids_and_addresses():
    socks = parse_ss(CLIENT_SS)
    assert [(s["local"], s["peer"], s["pids"]) for s in socks[:2]] == [
        ("10.201.0.1:40001", "10.201.0.2:2121", [111]), ("10.201.0.1:40002", "10.201.0.2:50001", [111])]
    assert "pids" not in parse_ss(SERVER_SS)[0]


class _Proc:
    def __init__(self, pid):
        self.pid = pid


class _Link:
    def command(self, side, argv):
        return [side, *argv]


def _watch(index, kind, pid, is_data):
    from drsftp.bench.compete.spec import Flow

    w = competerun.Watch(Flow(index, kind, f"{kind}#1", 0.0), [], "drsftp", is_data, "")
    w.proc = _Proc(pid)
    return w


def test_a_flow_owns_its_clients_data_sockets_and_their_server_ends_only(monkeypatch):
    ftp = _watch(0, "stock-64k", 111, lambda s: competerun._port_of(s["peer"]) != "2121")
    other = _watch(1, "drs", 222, lambda s: True)
    iperf = _watch(2, "iperf3", 333, lambda s: competerun._port_of(s["local"]) == "20002")
    sampler = competerun.CompeteSampler(_Link(), [ftp, other, iperf], t0=0.0, interval=1.0)
    texts = {"client": CLIENT_SS, "server": SERVER_SS}
    monkeypatch.setattr(sampler, "_ss", lambda cmd: parse_ss(texts[cmd[0]]))
    sampler.sample()
    s = ftp.samples[-1]
    # the data connection alone: not the control connection to 2121, not pid 222's socket
    assert (s["bytes"], s["rcvbuf"], s["rcv_used"], s["sockets"]) == (500000, 131072, 1000, 1)
    assert (s["sndbuf"], s["snd_used"], s["rtt_ms"], s["retrans"]) == (262144, 120000, 20.5, 7)
    # the window the receiver advertised as its sender saw it; cwnd and in flight in bytes (segments x MSS)
    assert (s["snd_wnd"], s["cwnd"], s["inflight"]) == (65536, 14480, 5792)
    assert other.samples[-1]["rcvbuf"] == 2097152 and other.samples[-1]["sndbuf"] is None  # no server end seen
    assert other.samples[-1]["snd_wnd"] is None and other.samples[-1]["inflight"] is None
    assert (iperf.samples[-1]["bytes"], iperf.samples[-1]["rcvbuf"]) == (700000, 6291456)
    # the data socket closes: its bytes stay the flow's, a new one adds to them
    texts["client"] = CLIENT_SS.replace("40002 10.201.0.2:50001", "40005 10.201.0.2:50003").replace(
        "bytes_received:500000", "bytes_received:1000")
    sampler.sample()
    assert ftp.samples[-1]["bytes"] == 501000 and ftp.samples[-1]["sndbuf"] is None
    ftp.end_s = 3.0  # ended: sampled no more
    sampler.sample()
    assert len(ftp.samples) == 2 and len(other.samples) == 3


def test_flows_of_one_tuning_share_a_server_and_each_iperf3_flow_has_its_own(tmp_path):
    from drsftp.bench.compete.run import CompeteConfig, _launch

    class Link:
        server_addr = "10.201.0.2"

    spec = "2*stock-64k+drs+drs-P-auto+drs:1MiB+kernel+2*kernel-vsftpd+iperf3+iperf3:4MiB"
    cfg = CompeteConfig(spec=spec, flows=parse_compete(spec), path=T.Path(rate=20e6, rtt=0.02), duration=4.0)
    servers = {}
    got = [_launch(cfg, Link(), f, str(tmp_path), str(tmp_path), str(tmp_path), None, servers) for f in cfg.flows]
    ports = [port for _, _, port in got]
    assert ports == [2121, 2121, 2122, 2122, 2123, 2124, 2125, 2125, 5209, 5210]
    server = {port: argv for argv, _, port in got}
    assert server[2121][server[2121].index("--tuning") + 1] == "fixed:64k"
    assert server[2123][server[2123].index("--tuning") + 1] == "drs:1MiB"
    assert all(server[p][-2:] == ["--max-connections-per-ip", "0"] for p in (2121, 2122, 2123))
    with open(server[2125][1]) as conf:
        assert server[2125][0] == "vsftpd" and "listen_port=2125" in conf.read()
    clients = [w.client for _, w, _ in got]
    assert clients[3][-2:] == ["-P", "auto"] and "--max-time" in clients[0]
    assert clients[8][-2:] == ["-t", "4"] and clients[8][clients[8].index("--cport") + 1] == "20008"
    assert "-w" not in clients[8]  # autotuning; iperf3:SIZE sets both ends' buffers (-R: the server's too)
    assert clients[9][clients[9].index("-w") + 1] == str(4 << 20) and cfg.flows[9].family == "iperf3"
    # which sockets are each flow's data: not its FTP control connection, iperf3's by its client port
    is_data = [w.is_data for _, w, _ in got]
    assert not is_data[0]({"local": "10.201.0.1:40000", "peer": "10.201.0.2:2121"})
    assert is_data[0]({"local": "10.201.0.1:40001", "peer": "10.201.0.2:50000"})
    assert is_data[8]({"local": "10.201.0.1:20008", "peer": "10.201.0.2:5209"})
    assert not is_data[8]({"local": "10.201.0.1:40002", "peer": "10.201.0.2:5209"})


# ---------------------------------------------------------------- command line


@pytest.fixture
def no_compete(monkeypatch, tmp_path):
    """bench compete in an empty directory, its run replaced by Reached."""
    stop_at_run(monkeypatch, tmp_path, (compete, "run_compete"), (competerun, "Link"))
    return Reached


@pytest.mark.parametrize("argv,message", [
    (["3*bogus"], "SPEC: '3*bogus': unknown kind 'bogus'; choose from " + ", ".join(
        [*T.TUNINGS, "fixed:SIZE", "drs:CAP", "drs-P-N", "drs-P-auto", "gridftp-pN", "iperf3", "iperf3:SIZE"])),
    (["drs", "--rates", "20mbit,100mbit"], "a competition runs on one link: give one --rates value"),
    (["drs", "--rtts", "20ms,1s"], "a competition runs on one link: give one --rtts value"),
    (["drs", "--rates", "0"], "--rates: a bench rate must be above 0 (0 is a link without a ceiling)"),
    (["drs", "--losses", "2"], "--losses: loss must lie between 0 and 100%, not 200%"),
    (["drs", "--tunings", "drs"], "unrecognized arguments: --tunings drs; see drsftp bench compete --help"),
    (["drs", "--quick"], "unrecognized arguments: --quick; see drsftp bench compete --help"),
    (["drs", "--profiles", "fast"], "unknown profile 'fast'; choose from default, tuned"),
    (["drs", "--duration", "0"], "--duration must be seconds above 0, at most 3600, not 0"),
    (["drs", "--duration", "nan"], "--duration must be seconds above 0, at most 3600, not nan"),
    (["drs", "--duration", "5", "--size", "1MiB"],
     "--duration and --size exclude each other (a time or a file for each flow)"),
    (["drs", "--max-time", "0"], "--max-time must be a number of seconds above 0, not 0"),
])
def test_a_bad_compete_option_is_refused_before_anything_is_made(argv, message, no_compete, capsys):
    assert usage_exit(["bench", "compete", *argv]) == 2
    assert capsys.readouterr().err == f"drsftp: error: {message}\n"
    assert os.listdir(".") == []


def test_a_valid_compete_reaches_its_run_with_every_value_parsed(no_compete):
    with pytest.raises(no_compete) as got:
        main(["bench", "compete", "2*stock-64k+drs:1MiB@2s", "--rates", "20mbit", "--rtts", "20ms",
              "--queue", "100", "--duration", "4", "--profiles", "tuned", "--cc", "reno"])
    cfg = got.value.args[0]
    assert [(f.label, f.delay) for f in cfg.flows] == [("stock-64k#1", 0.0), ("stock-64k#2", 0.0),
                                                       ("drs:1MiB#1", 2.0)]
    assert (cfg.path.rate, cfg.path.rtt, cfg.path.loss, cfg.path.queue) == (20e6, 0.02, 0.0, 100)
    assert (cfg.duration, cfg.cap, cfg.profile, cfg.spec) == (4.0, 4.0, "tuned", "2*stock-64k+drs:1MiB@2s")
    assert cfg.sysctls()["net.ipv4.tcp_congestion_control"] == "reno"
    assert compete.file_name(cfg) == "compete-2xstock-64k+drs_1MiB_at_2s-20mbit-20ms-q100.json"
    with pytest.raises(no_compete) as got:
        main(["bench", "compete", "drs", "--size", "8MiB", "--max-time", "9"])
    cfg = got.value.args[0]
    assert (cfg.duration, cfg.file_size(), cfg.cap, cfg.path.rate, cfg.path.rtt) == (None, 8 << 20, 9.0, 100e6, 0.1)


def test_a_flows_time_is_covered_by_its_file():
    from drsftp.bench.compete.run import CompeteConfig

    cfg = CompeteConfig(spec="drs", flows=parse_compete("drs"), path=T.Path(rate=1e9, rtt=0.1), duration=30.0)
    assert cfg.file_size() > 1e9 / 8 * 30  # no flow ends before its time is up


# ---------------------------------------------------------------- benchreport


def _results(spec="2*stock-64k+drs:1MiB", cap=1 << 20, queue=100, drs_rate=12e6):
    flows = [_flow("stock-64k#1", "stock-64k", 4e6, 128 << 10), _flow("stock-64k#2", "stock-64k", 2e6, 128 << 10),
             _flow("drs:1MiB#1", f"drs:{cap}", drs_rate, cap), _flow("kernel#1", "kernel", 0.0, 0, error="boom")]
    flows[2]["label"] = f"drs:{cap}#1"
    link = {"rate_bps": 20e6, "rtt_s": 0.02, "loss": 0.0, "queue_packets": queue, "ceiling_mbps": 19.3,
            "backend": "tun", "bdp": 50000}
    return {"compete": 1, "spec": spec, "environment": {}, "link": link, "duration_s": 4.0,
            "file_size": 1 << 30, "flows": flows, "summary": summary(flows[:3], 19.3)}


def test_the_report_tables_hold_each_kind_and_each_flow():
    data = _results()
    header, rows = kind_table(data)
    assert header[5] == "Jain"
    assert [r[0] for r in rows] == ["stock-64k", "drs:1048576"]  # the failed kernel flow is left out
    stock = rows[0]
    assert stock[1] == "2" and stock[5] == f"{jain([data['flows'][0]['mbps'], data['flows'][1]['mbps']]):.3f}"
    assert stock[6] == "128 KiB" and rows[1][6] == "1.00 MiB"
    header, rows = flow_table(data)
    assert header[3] == "receiver buffer" and rows[3][0] == "kernel#1 (FAILED: boom)" and rows[2][3] == "1.00 MiB"
    text = markdown(data)
    assert text.splitlines()[0] == "**2*stock-64k+drs:1MiB: 20 Mbit/s, 20 ms, queue 100 packets, 4 s each**"
    assert "Link use " in text and "1 flow(s) FAILED." in text
    assert slug("10*stock-64k+1*drs:1MiB@5s") == "10xstock-64k+1xdrs_1MiB_at_5s"


def test_goodput_against_the_drs_cap_takes_one_point_per_results_file():
    datas = [_results(spec=f"2*stock-64k+drs:{c}", cap=c, drs_rate=r) for c, r in ((4 << 20, 14e6), (1 << 20, 10e6))]
    other = _results(spec="2*stock-64k+drs:1MiB", queue=500)
    other["link"]["sysctls"] = {"net.ipv4.tcp_congestion_control": "bbr"}
    series = cap_points([*datas, other])
    where = (20e6, "2*stock-64k+drs:CAP")
    assert sorted(series) == [(*where, "?", 100, "drs"), (*where, "?", 100, "stock-64k"),
                              (*where, "bbr", 500, "drs"), (*where, "bbr", 500, "stock-64k")]
    drs = series[(*where, "?", 100, "drs")]
    assert [c for c, _ in drs] == [1 << 20, 4 << 20] and drs[0][1] < drs[1][1]


def test_benchreport_prints_compete_results_and_draws_their_plots(tmp_path, capsys):
    paths = []
    for cap in (1 << 20, 4 << 20):
        p = tmp_path / f"compete-{cap}.json"
        p.write_text(json.dumps(_results(cap=cap)))
        paths.append(str(p))
    assert main(["benchreport", *paths, "--plots", str(tmp_path / "plots")]) == 0
    out = capsys.readouterr()
    assert out.out.count("| kind | flows |") == 2 and "| drs:4194304#1 |" in out.out
    assert sorted(os.listdir(tmp_path / "plots")) == ["compete-1048576-goodput.png", "compete-4194304-goodput.png",
                                                      "compete-vs-cap.png"]


@pytest.mark.parametrize("change,message", [
    (lambda d: d["flows"][0].update(kind="warp"), "flow 1 has a bad kind ('warp')"),
    (lambda d: d["flows"][1].pop("per_second"), "flow 2 has no per_second"),
    (lambda d: d["flows"][0].update(mbps=-1), "flow 1 has a bad mbps ('-1')"),
    (lambda d: d["link"].pop("ceiling_mbps"), "it has a bad link"),
    (lambda d: d.pop("flows"), "its flows are not a list"),
])
def test_a_damaged_compete_file_is_one_sentence(change, message, tmp_path, capsys):
    data = _results()
    change(data)
    p = tmp_path / "c.json"
    p.write_text(json.dumps(data))
    assert main(["benchreport", str(p)]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"drsftp: error: {p} is not the output of drsftp bench: {message}") and err.count("\n") == 1


def test_compete_results_print_alone_and_take_no_bench_filters(tmp_path, capsys):
    p = tmp_path / "c.json"
    p.write_text(json.dumps(_results()))
    assert main(["benchreport", str(p), "--rtt", "20ms"]) == 2
    assert "--rtt applies to bench results, not compete results" in capsys.readouterr().err
    csv = os.path.join(os.path.dirname(__file__), "..", "docs", "bench-data", "all-tunings-get-no-loss.csv")
    assert main(["benchreport", str(p), csv]) == 1
    assert "compete results (drsftp bench compete) print alone" in capsys.readouterr().err


def test_the_sharing_table_gives_a_row_a_file_and_the_medians_of_each_spec_and_commit(tmp_path, capsys):
    paths = []
    for name, commit, rate in (("old-1", "aaaaaaa1", 10e6), ("old-2", "aaaaaaa1", 12e6), ("old-3", "ccccccc3", 14e6),
                               ("new-1", "bbbbbbb2", 6e6)):
        data = _results(drs_rate=rate)
        data["environment"] = {"commit": commit}
        p = tmp_path / f"{name}.json"
        p.write_text(json.dumps(data))
        paths.append(str(p))
    assert main(["benchreport", "--table", "sharing", *paths]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == ("| file | spec | commit | Mbit/s per flow (of the ceiling) | link use"
                        " | while all ran: Mbit/s per flow (of the ceiling) | link use while all ran"
                        " | Jain while all ran | 0.95 after, s |")
    rows = [line.split(" | ") for line in lines[2:]]
    # the runs of one measurement: named alike but for a trailing -N (one run: no median)
    assert [r[0] for r in rows] == ["| old-1", "| old-2", "| old-3", "| new-1", "| median of 3: old"]
    assert rows[1][2] == "aaaaaaa" and "drs:1048576#1 12 (62.2%)" in rows[1][3]  # 12 of 19.3 Mbit/s
    assert rows[2][2] == "ccccccc" and "drs:1048576#1 12 (62.2%)" in rows[4][3]
    assert "kernel#1" not in rows[0][3]  # a failed flow is left out
    assert main(["benchreport", "--table", "medians", *paths]) == 0
    rows = [line.split(" | ") for line in capsys.readouterr().out.splitlines()[2:]]
    assert [r[0] for r in rows] == ["| new-1", "| median of 3: old"]  # (a measurement of one run: its row)
    assert main(["benchreport", "--table", "speed", paths[0]]) == 2
    assert "--table speed applies to bench results, not compete results" in capsys.readouterr().err
    csv = os.path.join(os.path.dirname(__file__), "..", "docs", "bench-data", "all-tunings-get-no-loss.csv")
    assert main(["benchreport", "--table", "sharing", csv]) == 2
    assert "--table sharing applies to compete results" in capsys.readouterr().err
