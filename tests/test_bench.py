"""The bench's pure parts: ss parsing, --resume bookkeeping, the report."""

import json
import os
from typing import ClassVar

import pytest
from conftest import Reached, stop_at_run, usage_exit

from drsftp.bench.common import tunings as T
from drsftp.bench.common.sampler import counter_delta, parse_counters, parse_ss
from drsftp.bench.compare import runner
from drsftp.bench.compare.report import group, markdown

SS = """0      967259 10.201.0.2:41234 10.201.0.1:50000
\t skmem:(r0,rb131072,t0,tb3939840,f741,w986395,o0,bl0,d0) bbr wscale:10,10 rto:204 rtt:100.48/0.027 mss:1448 cwnd:866 bytes_sent:127973 bytes_acked:32742 retrans:0/3 unacked:820 notsent:524288 snd_wnd:1677336
0      0 10.201.0.2:2121 10.201.0.1:40000
\t skmem:(r0,rb131072,t0,tb46080,f0,w0,o0,bl0,d0) cubic rtt:100.5/0.1 mss:1448 cwnd:10
"""  # noqa: E501 (ss prints each socket's details on one long line)


def test_parse_ss_reads_buffers_and_skips_the_control_connection():
    socks = parse_ss(SS, skip_port=2121)
    assert len(socks) == 1
    s = socks[0]
    assert (s["sk_rb"], s["sk_tb"], s["sk_w"]) == (131072, 3939840, 986395)
    assert s["rtt_ms"] == pytest.approx(100.48) and s["retrans"] == 3
    assert s["cwnd"] * s["mss"] == 866 * 1448 and s["unacked"] == 820 and s["snd_wnd"] == 1677336
    assert s["notsent"] == 524288


NETSTAT = """TcpExt: SyncookiesSent PruneCalled OfoPruned TCPTimeouts TCPSACKReneging
TcpExt: 0 3 2 1 0
IpExt: InNoRoutes InOctets
IpExt: 0 123456
Tcp: RtoAlgorithm RtoMin RetransSegs
Tcp: 1 200 17
"""


def test_kernel_counters_parse_and_only_moved_ones_are_kept():
    before = parse_counters(NETSTAT)
    assert before["TcpExt.PruneCalled"] == 3 and before["Tcp.RetransSegs"] == 17
    assert before["IpExt.InOctets"] == 123456
    after = dict(before, **{"TcpExt.OfoPruned": 5, "Tcp.RetransSegs": 20})
    assert counter_delta(before, after) == {"TcpExt.OfoPruned": 3, "Tcp.RetransSegs": 3}
    assert counter_delta(before, before) == {}
    assert parse_counters("garbage\nlines here\n") == {}


def test_resume_skips_a_path_already_measured_without_bringing_up_a_link(monkeypatch):
    path = T.Path(rate=100e6, rtt=0.1)
    cfg = runner.BenchConfig(paths=[path], tunings=["kernel", "drs"], directions=["get"], reps=2,
                             log=lambda m: None)
    cfg.done = {("default", path.rate, path.rtt, path.loss, t, "get", rep) for t in ("kernel", "drs") for rep in (0, 1)}

    def no_link(*a, **k):
        raise AssertionError("a measured path must not bring up a link")

    monkeypatch.setattr(runner, "Link", no_link)
    assert runner._run_path(cfg, "default", {}, path, ["kernel", "drs"], []) == []
    cfg.done.discard(("default", path.rate, path.rtt, path.loss, "drs", "get", 1))
    with pytest.raises(AssertionError, match="must not bring up"):
        runner._run_path(cfg, "default", {}, path, ["kernel", "drs"], [])  # one run is missing


def test_runs_interleave_tunings_so_drift_does_not_land_in_the_ratios():
    order = runner.run_order(["kernel", "manual", "drs"], ["get", "put"], 3)
    assert len(order) == len(set(order)) == 18
    assert order[:3] == [("kernel", "get", 0), ("manual", "get", 0), ("drs", "get", 0)]
    # each tuning's runs are spread over the whole batch, not bunched together
    for tuning in ("kernel", "drs"):
        where = [i for i, (t, _, _) in enumerate(order) if t == tuning]
        assert where[0] < 3 and where[-1] >= len(order) - 3


def test_every_run_is_saved_as_it_ends_so_a_stopped_bench_resumes_there(monkeypatch, tmp_path):
    path = T.Path(rate=100e6, rtt=0.1)
    cfg = runner.BenchConfig(paths=[path], tunings=["kernel", "drs"], directions=["get"], reps=2,
                             size=4096, workdir=str(tmp_path), log=lambda m: None)
    cfg.done = {("default", path.rate, path.rtt, path.loss, "kernel", "get", 0)}

    class FakeLink:
        backend = "fake"
        info: ClassVar[dict] = {"spec": {"queue_packets": 64}, "sides": {"server": {"sysctls": {}}}}

        def __init__(self, **kw): pass
        def __enter__(self): return self
        def __exit__(self, *exc): return False

    def one_run(cfg_, link, tuning, direction, path_, rep, *rest):
        if (tuning, rep) == ("drs", 1):
            raise KeyboardInterrupt  # Ctrl-C during the last run of the batch
        return {"tuning": tuning, "direction": direction, "rep": rep, "mbps": 1.0, "complete": True}

    monkeypatch.setattr(runner, "Link", FakeLink)
    monkeypatch.setattr(runner, "_run_one", one_run)
    saved_lengths, out = [], []
    with pytest.raises(KeyboardInterrupt):
        runner._run_path(cfg, "default", {}, path, ["kernel", "drs"], out, lambda: saved_lengths.append(len(out)))
    assert [(r["tuning"], r["rep"]) for r in out] == [("drs", 0), ("kernel", 1)]
    assert saved_lengths == [1, 2]  # written after each run, not once per path
    assert all("commit" in r for r in out)  # the code each run measured (None outside git)


def _run(tuning, mbps, rep=0, rtt=0.1, complete=True):
    return {"profile": "default", "rate_bps": 100e6, "rtt_s": rtt, "loss": 0.0, "direction": "get",
            "tuning": tuning, "rep": rep, "mbps": mbps, "complete": complete, "ceiling_mbps": 96.5,
            "peak_rcvbuf": 2_500_000, "peak_sndbuf": 1_250_000, "retransmits": 100 * rep,
            "rtt_avg_ms": 100.0 + rep}


def test_report_medians_ratios_and_memory():
    runs = [_run("stock-64k", 6.0, complete=False), _run("kernel", 80.0), _run("drs", 90.0, 0),
            _run("drs", 94.0, 1), _run("drs", 10.0, 2)]
    assert group(runs)[("default", 100e6, 0.1, 0.0, "get")]["drs"] == [90.0, 94.0, 10.0]
    env = {"kernel": "k", "machine": "m", "congestion_control": "bbr", "buffer_force_used": False,
           "buffer_force_available": True, "date": "d",
           "host_sysctls": {"net.core.rmem_max": 1, "net.core.wmem_max": 1, "net.ipv4.tcp_wmem": [1, 2, 3]}}
    text = markdown(env, runs, list(T.TUNINGS))
    assert "| default 100M 100ms get | 6.0* | 80.0 | 90.0 [10.0-94.0] | 96.5 |" in text
    assert "15.0x / 1.12x / 93%" in text  # drs median 90 vs 6 and 80, of 96.5
    assert "2.0 / 1.0 (- / -)" in text  # 2.5 MB and 1.25 MB against a 1.25 MB BDP; no timelines
    # the median over the transfer: per run over its samples, then over the runs
    runs[2]["receiver_timeline"] = [{"rcvbuf": v} for v in (1_250_000, 2_500_000, 2_500_000)]
    runs[3]["receiver_timeline"] = [{"rcvbuf": 625_000}]
    runs[2]["timeline"] = [{"sndbuf": None}, {"sndbuf": 1_250_000}]
    assert "2.0 / 1.0 (1.2 / 1.0)" in markdown(env, runs, list(T.TUNINGS))
    assert "| 0 / 100 | 0 / 100 | 100 / 101 |" in text  # drs: medians of 0/100/200 and 100/101/102
    # memory in use (skmem r / w): the median of the runs' peaks; unknown: "-"
    assert "| - / - | - / - | - / - |" in text
    for rep, (r_used, w_used) in enumerate(((125_000, 2_500_000), (250_000, 1_250_000), (1_250_000, 0))):
        runs[2 + rep].update(peak_rcv_used=r_used, peak_snd_used=w_used)
    assert "| - / - | - / - | 0.2 / 1.0 |" in markdown(env, runs, list(T.TUNINGS))
    assert text.endswith("; d.")  # no commit recorded (older results): none printed
    assert markdown(dict(env, commit="0123abcd+"), runs, list(T.TUNINGS)).endswith("; d; drsftp 0123abcd+.")
    # CPU per GB moved: each run's seconds over its bytes, median over the runs
    for rep, (cli, srv) in enumerate(((1.5, 0.2), (3.0, 0.4), (6.0, None))):
        runs[2 + rep].update(bytes=1_500_000_000, client_cpu_s=cli, server_cpu_s=srv)
    runs[1].update(bytes=0, client_cpu_s=1.0, server_cpu_s=1.0)  # nothing moved: no figure
    cpu_table = markdown(env, runs, list(T.TUNINGS)).split("CPU seconds per GB")[1]
    assert "| default 100M 100ms get | - / - | - / - | 2.00 / 0.20 |" in cpu_table


def test_benchreport_filters_runs_by_direction_loss_rate_and_rtt():
    import argparse

    from drsftp.bench.benchreport import _run_filter

    runs = [_run("drs", 90.0), dict(_run("drs", 50.0), direction="put"), dict(_run("drs", 40.0), loss=0.001),
            dict(_run("drs", 30.0, rtt=0.025)), dict(_run("drs", 900.0), rate_bps=1e9)]

    def kept(**kw):
        args = argparse.Namespace(**{"direction": None, "loss": None, "rate": None, "rtt": None, **kw})
        return [r["mbps"] for r in runs if _run_filter(args)(r)]

    assert kept() == [90.0, 50.0, 40.0, 30.0, 900.0]
    assert kept(direction="put") == [50.0]
    assert kept(loss="0.1%") == [40.0]
    assert kept(loss="0", rate="100mbit", rtt="100ms", direction="get") == [90.0]
    assert kept(rate="1gbit") == [900.0]


def test_plot_of_upload_runs_draws_the_uploads(tmp_path, monkeypatch):
    """A results file with only put runs plots them (the plot once showed
    get only, and drew an empty picture for an upload matrix)."""
    from matplotlib.axes import Axes

    from drsftp.bench.compare.report import plot

    runs = [dict(_run(t, m, rtt=rtt), direction="put") for t, m in (("drs", 90.0), ("kernel", 80.0))
            for rtt in (0.025, 0.1)]
    drawn = []
    real = Axes.plot
    monkeypatch.setattr(Axes, "plot", lambda ax, *a, **kw: drawn.append(kw.get("label")) or real(ax, *a, **kw))
    made = plot(runs, str(tmp_path))
    assert any(p.endswith("throughput_vs_rtt.png") for p in made)
    assert {"drs", "kernel"} <= set(drawn)


def test_csv_counters_come_from_the_end_that_sees_them():
    from drsftp.bench.compare.report import csv_counters

    counters = {"server": {"TcpExt.OfoPruned": 2, "TcpExt.TCPTimeouts": 5},
                "client": {"TcpExt.TCPTimeouts": 1, "TcpExt.TCPSACKReneging": 1, "TcpExt.OfoPruned": 7}}
    put = csv_counters({"direction": "put", "tcp_counters": counters, "client_report": {"kernel_owns": "sndbuf"}})
    assert put == {"client_kernel_owns": "sndbuf", "sender_timeouts": 1, "sender_sack_reneging": 1,
                   "receiver_ofo_pruned": 2, "receiver_prune_called": 0}
    get = csv_counters({"direction": "get", "tcp_counters": counters})
    assert (get["sender_timeouts"], get["receiver_ofo_pruned"], get["client_kernel_owns"]) == (5, 7, None)
    assert csv_counters({"direction": "get"}) == {}


class _FakeDataConn:
    """The data connection of a stock put whose first sendall waits ``stall``
    seconds of the fake clock (slow start filling the path)."""

    def __init__(self, clock: list[float], stall: float) -> None:
        self.clock, self.stall, self.sent = clock, stall, []

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def sendall(self, buf: bytes) -> None:
        if not self.sent:
            self.clock[0] += self.stall
        self.clock[0] += 0.01
        self.sent.append(len(buf))


def test_stock_put_is_timed_from_the_first_byte_handed_to_the_socket():
    """ftplib calls back after each block is sent: a clock started there
    missed the first block's wait (docs/decisions/0003-upload-clock.md)."""
    import ftplib
    import io

    from drsftp.bench.common import stockclient

    clock = [100.0]
    conn = _FakeDataConn(clock, stall=0.5)

    class FakeFTP(ftplib.FTP):
        def voidcmd(self, cmd):
            return "200 ok"

        def transfercmd(self, cmd, rest=None):
            assert cmd == "STOR up.bin"
            return conn

        def voidresp(self):
            clock[0] += 0.05
            return "226 done"

    meter = stockclient.Meter(clock=lambda: clock[0])
    data = b"x" * (3 * stockclient.BLOCK + 5)
    stockclient.store(FakeFTP(), "up.bin", io.BytesIO(data), meter)
    fig = meter.figures(clock[0])
    assert conn.sent == [stockclient.BLOCK] * 3 + [5]
    assert fig["bytes"] == len(data)
    assert fig["seconds"] == pytest.approx(0.5 + 4 * 0.01 + 0.05)
    assert fig["first_block_s"] == pytest.approx(0.51)


def test_stock_get_is_timed_from_the_first_byte_received_and_stops_at_max_time():
    from drsftp.bench.common import stockclient

    clock = [0.0]

    class FakeFTP:
        def retrbinary(self, cmd, callback, blocksize):
            for _ in range(10):
                clock[0] += 1.0
                callback(b"y" * 1000)

    meter = stockclient.Meter(max_time=3.0, clock=lambda: clock[0])
    sink = []
    with pytest.raises(stockclient._Stopped):
        stockclient.retrieve(FakeFTP(), "f", type("F", (), {"write": lambda self, c: sink.append(c)})(), meter)
    fig = meter.figures(clock[0])
    assert (fig["bytes"], fig["seconds"], fig["complete"]) == (4000, 3.0, False)


@pytest.fixture
def no_run(monkeypatch, tmp_path):
    """The bench in an empty directory, its runs and links replaced by Reached."""
    from drsftp.bench.field import run as field

    return stop_at_run(monkeypatch, tmp_path, (runner, "run_bench"), (runner, "Link"), (field, "run_field"),
                       (field, "Link"))


@pytest.mark.parametrize("argv,message", [
    (["--losses", "200%"], "--losses: loss must lie between 0 and 100%, not 200%"),
    (["--losses", "0,nan"], "--losses: not a loss rate: 'nan' (examples: 0.1%, 0.001)"),
    (["--rtts", "100ms,bogus"], "--rtts: not a duration: 'bogus' (examples: 100ms, 0.5ms, 1s)"),
    (["--rtts", "20s"], "--rtts: rtt must be between 0 and 10 s, not 20.0"),
    (["--rtts", ","], "--rtts needs at least one value"),
    (["--rates", "1gbit,0"], "--rates: a bench rate must be above 0 (0 is a link without a ceiling)"),
    (["--rates", "5kbit"], "--rates: rate must be at least 10 kbit/s (or 0 for unlimited), not 5000"),
    (["--tunings", ""], "--tunings needs at least one value"),
    (["--tunings", "drs,fast"], "unknown tuning 'fast'; choose from " + ", ".join(T.TUNINGS)),
    (["--directions", "up"], "unknown direction 'up'; choose from get, put"),
    (["--profiles", "default,fast"], "unknown profile 'fast'; choose from default, tuned"),
    (["--reps", "0"], "--reps must be at least 1"),
    (["--max-time", "nan"], "--max-time must be a number of seconds above 0, not nan"),
    (["--max-time", "-5"], "--max-time must be a number of seconds above 0, not -5"),
    (["--queue", "0"], "--queue: queue must be 1..1000000 packets, not 0"),
    (["--size", "0"], "--size: size must be positive: '0'"),
    (["--scale", "0.5"], "unrecognized arguments: --scale 0.5; see drsftp bench compare --help"),
    (["--quick", "--rtts", "25ms"], "--rtts does not apply to --quick (100 Mbit/s, 100 ms, stock-64k, kernel, drs, "
                                    "one get each)"),
])
def test_a_bad_bench_option_is_refused_before_anything_is_made(argv, message, no_run, capsys):

    assert usage_exit(["bench", "compare", *argv]) == 2
    assert capsys.readouterr().err == f"drsftp: error: {message}\n"
    assert os.listdir(no_run) == []  # no bench-results/{client,root}, no file to send


def test_a_valid_bench_reaches_its_run_with_every_value_parsed(no_run):
    from drsftp.cli import main

    with pytest.raises(Reached) as got:
        main(["bench", "compare", "--rtts", "25ms,100ms", "--rates", "100mbit", "--losses", "0,0.1%", "--tunings",
              "drs,drs", "--directions", "get", "--profiles", "default"])
    cfg = got.value.args[0]
    assert [(p.rtt, p.loss) for p in cfg.paths] == [(0.025, 0.0), (0.025, 0.001), (0.1, 0.0), (0.1, 0.001)]
    assert cfg.tunings == ["drs"] and cfg.reps == 3 and cfg.max_time == 60.0


def test_resume_refuses_a_damaged_results_file_in_one_sentence(no_run, capsys):
    from drsftp.cli import main

    os.mkdir("out")
    with open("out/results.json", "w") as f:
        json.dump({"environment": {}, "runs": [{"tuning": "drs"}]}, f)
    assert main(["bench", "compare", "--resume", "--out", "out"]) == 1
    assert capsys.readouterr().err == ("drsftp: error: --resume: out/results.json is not the output of drsftp "
                                       "bench: its environment is incomplete\n")
    assert os.listdir("out") == ["results.json"]


@pytest.mark.parametrize("argv,message", [
    (["--reps", "0"], "--reps must be at least 1"),
    (["--size", "lots"], "--size: not a size: 'lots' (examples: 65536, 64k, 4MiB)"),
    (["--rate", "5kbit"], "--rate/--rtt: rate must be at least 10 kbit/s (or 0 for unlimited), not 5000"),
    (["--rate", "1gbit", "--rtt", "11s"], "--rate/--rtt: rtt must be between 0 and 10 s, not 11.0"),
    (["--rtt", "1ms"], "--rtt goes with --rate (loopback has no RTT to set)"),
])
def test_datapath_refuses_bad_options_before_writing_its_file(argv, message, monkeypatch, capsys):
    from drsftp.bench.checks import datapath
    from drsftp.cli import main

    def reached(*args, **kw):
        raise Reached

    monkeypatch.setattr(datapath, "run_datapath", reached)
    assert main(["datapath", *argv]) == 2
    assert capsys.readouterr().err == f"drsftp: error: {message}\n"


@pytest.mark.parametrize("argv,message", [
    (["--paths", "100mbit"], "--paths: a path is RATE/RTT, e.g. 100mbit/100ms, not '100mbit'"),
    (["--paths", "5kbit/10ms"], "--paths: rate must be at least 10 kbit/s (or 0 for unlimited), not 5000"),
    (["--rtts", "11s"], "--rtts: rtt must be between 0 and 10 s, not 11.0"),
    (["--losses", "120%"], "--losses: loss must lie between 0 and 100%, not 120%"),
    (["--ccs", "vegas"], "unknown congestion control 'vegas'; choose from bbr, cubic, reno"),
    (["--rtts", "", "--paths", "", "--losses", ""], "nothing to check: --rtts, --paths and --losses are all empty"),
])
def test_netemcheck_refuses_bad_options_before_any_link(argv, message, monkeypatch, capsys):
    from drsftp.bench.checks import netemcheck
    from drsftp.cli import main

    def reached(*args, **kw):
        raise Reached

    monkeypatch.setattr(netemcheck, "run_netem_check", reached)
    assert main(["netemcheck", *argv]) == 2
    assert capsys.readouterr().err == f"drsftp: error: {message}\n"


def test_netemcheck_plan_takes_every_value_and_quick_shortens_it(monkeypatch):
    from drsftp.bench.checks import netemcheck
    from drsftp.cli import main

    plans = []
    monkeypatch.setattr(netemcheck, "run_netem_check", lambda out, plan: plans.append(plan) or 0)
    assert main(["netemcheck", "--backend", "tc", "--rtts", "50ms", "--paths", "30mbit/50ms,0/10ms",
                 "--losses", "1%", "--ccs", "reno", "--quick"]) == 0
    (plan,) = plans
    assert plan == netemcheck.CheckPlan(rtts=[0.05], paths=[(30e6, 0.05), (0.0, 0.01)], losses=[0.01], backend="tc",
                                   ccs=("reno",), seconds=8, loss_pings=2000)
    assert main(["netemcheck"]) == 0  # the defaults: the tun table of docs/NETEM.md
    assert plans[1].paths == [(100e6, 0.1), (1e9, 0.1), (100e6, 0.02), (0.0, 0.1)]
    assert (plans[1].ccs, plans[1].seconds, plans[1].loss_pings, plans[1].backend) == (("bbr", "reno"), 15, 4000,
                                                                                        "auto")


def test_netemcheck_judges_the_queue_by_its_drain_time_and_goodput_by_the_ceiling():
    from drsftp.bench.checks.netemcheck import _goodput, ceiling, queue_delay

    assert queue_delay(30e6, 125) == pytest.approx(0.05)  # 125 x 1500 bytes at 30 Mbit/s
    assert ceiling(100e6) == pytest.approx(96.53e6, rel=1e-3)  # 1448 of each 1500 bytes
    assert _goodput("reno", "", 0.975 * ceiling(30e6), 0, 30e6, "tc").ok
    assert not _goodput("reno", "", 0.96 * ceiling(30e6), 0, 30e6, "tc").ok
    assert _goodput("bbr", "", 0.96 * ceiling(30e6), 0, 30e6, "tc").ok  # its pacing margin and PROBE_RTT


@pytest.mark.parametrize("command", [["bench"], ["datapath"], ["benchreport"], ["netemcheck"], ["netem", "up"],
                                     ["netem", "down"], ["netem", "exec"], ["netem", "status"]])
def test_help_of_the_bench_and_netem_commands_renders(command, capsys):
    from drsftp.cli import main

    with pytest.raises(SystemExit) as done:  # a '%' in a help text argparse formats is a ValueError
        main([*command, "--help"])
    assert done.value.code == 0 and "usage: drsftp" in capsys.readouterr().out
