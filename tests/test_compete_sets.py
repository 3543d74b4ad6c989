"""Sweeps of `drsftp bench compete`: a set of results in one file, the
sweep table (a row per competition, the ratios the papers' fairness
measure compares), the window table of the low-rate case, the link's
counters, and benchmarks/papers.py's cells."""

import json
import os

import pytest
from conftest import benchmark_module

from drsftp.bench.compete.link import CpuMark, health_line, link_health
from drsftp.bench.compete.sets import add_to_set, cell_key, congestion_control, read_set, slim
from drsftp.bench.compete.spec import cap_template
from drsftp.bench.compete.stats import flow_figures, summary
from drsftp.bench.compete.sweep import sweep_table
from drsftp.bench.compete.window import plot_window, window_table
from drsftp.cli import main

ROOT = os.path.join(os.path.dirname(__file__), "..")


def _flow(label, kind, mbps, window, retrans=0, start=0.0, end=10.0, error=None):
    """A flow moving ``mbps`` from 1 s on, its advertised window and flight flat."""
    samples = [{"t": t / 4, "bytes": int(max(t / 4 - 1, 0) * mbps * 1e6 / 8), "rcvbuf": 2 * window,
                "snd_wnd": window, "inflight": window // 2, "retrans": retrans if t > 20 else 0,
                "rtt_ms": 60.0 + t % 3}
               for t in range(int(start * 4) + 1, int(end * 4) + 1)]
    rec = {"index": 0, "kind": kind, "label": label, "start_s": start, "end_s": end, "client_bytes": None,
           "error": error, "samples": samples}
    rec.update(flow_figures(rec, end))
    return rec


def _competition(spec, flows, queue=100, cc="reno", rate=100e6, rtt=0.06, force=True):
    ceiling = rate / 1e6 * 1448 / 1500
    return {"compete": 1, "spec": spec, "environment": {"congestion_control": "bbr", "buffer_force_used": force},
            "link": {"rate_bps": rate, "rtt_s": rtt, "loss": 0.0, "queue_packets": queue, "ceiling_mbps": ceiling,
                     "backend": "tun", "sysctls": {"net.ipv4.tcp_congestion_control": cc}},
            "duration_s": 10.0, "file_size": 1 << 30, "flows": flows, "summary": summary(flows, ceiling)}


def _sweep_cell(cap_segments, queue, drs_mbps, drs_window):
    cap = f"drs:{cap_segments * 1448}" if cap_segments else "drs"
    flows = [_flow(f"stock-64k#{i}", "stock-64k", 8.0 + i, 64 << 10, retrans=2) for i in (1, 2)]
    flows.append(_flow(f"{cap}#1", cap, drs_mbps, drs_window, retrans=9))
    return _competition(f"2*stock-64k+1*{cap}", flows, queue=queue)


# ---------------------------------------------------------------- the sweep table


def test_the_sweep_table_has_a_row_per_competition_in_the_sweeps_order_and_the_papers_ratios():
    cells = [_sweep_cell(None, 100, 40.0, 4 << 20), _sweep_cell(700, 100, 72.0, 1013600),
             _sweep_cell(100, 100, 18.0, 144800), _sweep_cell(100, 16384, 20.0, 144800)]
    header, rows = sweep_table(cells)
    assert header[:6] == ["link", "queue", "cc", "flows", "DRS cap, segments", "Mbit/s each [min-max]"]
    # the queue, then the cap (in segments of 1448 bytes), uncapped DRS last
    assert [(r[1], r[4]) for r in rows] == [("100", "100"), ("100", "700"), ("100", "none"), ("16384", "100")]
    row = rows[1]
    assert row[0] == "100 Mbit/s, 60 ms" and row[2] == "reno" and row[3] == "2*stock-64k+1*drs"
    stock = cells[1]["flows"][0]["mbps"], cells[1]["flows"][1]["mbps"]
    drs = cells[1]["flows"][2]["mbps"]
    assert row[5] == f"{sum(stock) / 2:.1f} [{min(stock):.1f}-{max(stock):.1f}] / {drs:.1f}"
    assert row[6] == f"{drs / (sum(stock) / 2):.1f}"  # the DRS flow's goodput over a static flow's
    assert row[7] == "64 / 990" and row[8] == "15.5"  # ... beside its window over theirs: the papers' measure
    assert row[9] == "2 / 9"  # retransmits each
    assert row[11] == f"{summary(cells[1]['flows'], cells[1]['link']['ceiling_mbps'])['link_use']:.0%}"


def test_a_failed_flow_is_left_out_of_the_sweep_and_a_competition_without_one_is_no_row():
    cell = _sweep_cell(100, 100, 18.0, 144800)
    cell["flows"][0]["error"] = "boom"
    failed = _competition("drs", [_flow("drs#1", "drs", 0.0, 0, error="boom")])
    _, rows = sweep_table([cell, failed])
    assert len(rows) == 1 and rows[0][5].startswith(f"{cell['flows'][1]['mbps']:.1f} / ")


def test_a_caps_template_names_the_sweep_a_result_belongs_to():
    assert cap_template("10*stock-64k+1*drs:1013600") == "10*stock-64k+1*drs:CAP"
    assert cap_template("5*fixed:64k+5*drs-closed:1MiB@2s") == "5*fixed:64k+5*drs-closed:CAP@2s"
    assert cap_template("drs+drs-P-4+iperf3") == "drs+drs-P-4+iperf3"


# ---------------------------------------------------------------- the window table


def test_the_window_table_gives_each_flows_largest_and_median_window_flight_rtt_and_retransmits(tmp_path):
    low = [_competition(kind, [_flow(f"{kind}#1", kind, 0.05, window, retrans=r)], queue=20, rate=56e3, rtt=0.1)
           for kind, window, r in (("stock-64k", 85510, 22), ("drs", 13 << 10, 0))]
    stock_flow = low[0]["flows"][0]
    stock_flow["samples"][5]["snd_wnd"] = 90000  # one larger offer: the largest, not the median
    stock_flow.update(flow_figures(stock_flow, 10.0))
    for key in ("wnd_peak", "inflight_peak"):  # a file from before these figures: read from its samples
        del low[1]["flows"][0][key]
    header, rows = window_table(low)
    assert header[4:7] == ["goodput", "advertised window: largest, KiB", "median, KiB"]
    stock, drs = rows
    goodput = stock_flow["bytes"] * 8 / stock_flow["seconds"] / 1e3  # (kbit/s from the bytes, not the rounded Mbit/s)
    assert stock[:5] == ["56 kbit/s, 100 ms", "20", "reno", "stock-64k#1", f"{goodput:.1f} kbit/s"]
    assert stock[5:7] == ["87.9", "83.5"]
    assert stock[7] == "41.8" and stock[9] == "61"
    moved = low[0]["flows"][0]["bytes"]
    assert stock[10] == "22" and stock[11] == f"{22 / (moved / 1e6):.1f}"
    assert drs[5] == "13.0" and drs[8] == "6.5" and drs[10] == "0" and drs[11] == "0.0"
    assert plot_window(low, str(tmp_path / "w.png")) == str(tmp_path / "w.png") and (tmp_path / "w.png").stat().st_size


# ---------------------------------------------------------------- the link's counters


def test_the_link_health_gives_drops_the_queues_peak_and_the_cpu_over_the_competition():
    counters = {"backend": "tun", "s2c": {"packets_in": 20000, "queue_drops": 50, "max_backlog_bytes": 150000},
                "c2s": {"packets_in": 9000, "queue_drops": 0, "max_backlog_bytes": 3000}}
    start, end = CpuMark(10.0, 5.0, 100.0, 400.0), CpuMark(40.0, 20.0, 148.0, 460.0)
    h = link_health(counters, start, end, cores=2)
    assert h["s2c"] == {"segments": 20000, "queue_drops": 50, "drop_share": 0.0025, "peak_queue_packets": 100.0}
    assert (h["forwarder_core"], h["host_busy"]) == (0.5, 0.8)  # 15 s of 30 s; 48 of 60 CPU seconds busy
    assert health_line(h) == (
        "Link (tun): server to client 20,000 segments, 50 dropped at the queue (0.25%), queue peak 100 packets; "
        "client to server 9,000 segments, 0 dropped at the queue (0.00%), queue peak 2 packets; the forwarder used "
        "50% of a core; the host's 2 cores were 80% busy.")
    # tc: netem counts loss and queue drops in one figure, and its forwarding is the kernel's
    tc = link_health({"backend": "tc", "s2c": {"packets_in": 10, "queue_drops": None, "lost": None}},
                     CpuMark(0.0, None, 0.0, 10.0), CpuMark(1.0, None, 5.0, 20.0), cores=2)
    assert "forwarder_core" not in tc and tc["s2c"]["drop_share"] is None
    assert health_line(tc) == ("Link (tc): server to client 10 segments, an unknown number dropped (loss and queue "
                               "together); the host's 2 cores were 50% busy.")
    assert health_line(None) is None


# ---------------------------------------------------------------- sets and benchreport


def test_a_set_keeps_one_result_per_cell_without_its_samples_unless_asked(tmp_path):
    path = str(tmp_path / "set.json")
    a, b = _sweep_cell(100, 100, 18.0, 144800), _sweep_cell(200, 100, 30.0, 289600)
    add_to_set(path, a)
    add_to_set(path, b, sample_every=1.0)
    again = _sweep_cell(100, 100, 20.0, 144800)
    results = add_to_set(path, again)
    assert [r["spec"] for r in results] == [b["spec"], a["spec"]]  # the cell run again replaces its old result
    assert read_set(path) == results and results[1]["flows"][2]["mbps"] == again["flows"][2]["mbps"]
    assert all(f["samples"] == [] for f in results[1]["flows"])
    # one sample a second (of four), and the last; the flow's own figures as measured
    kept = results[0]["flows"][2]
    assert [s["t"] for s in kept["samples"]] == [0.25, 1.25, 2.25, 3.25, 4.25, 5.25, 6.25, 7.25, 8.25, 9.25, 10.0]
    assert kept["wnd_peak"] == b["flows"][2]["wnd_peak"] and kept["mbps"] == b["flows"][2]["mbps"]
    assert slim(a)["flows"][0]["wnd_mean"] == a["flows"][0]["wnd_mean"] and a["flows"][0]["samples"]  # a copy
    other_cc = _competition(a["spec"], a["flows"], cc="bbr")
    assert cell_key(other_cc) != cell_key(a) and congestion_control(other_cc) == "bbr"
    assert read_set(str(tmp_path / "none.json")) == []


def test_benchreport_prints_the_sweep_and_window_tables_of_a_set_and_draws_their_plots(tmp_path, capsys):
    path = str(tmp_path / "set.json")
    for cap, rate in ((100, 18.0), (400, 50.0), (700, 60.0)):
        add_to_set(path, _sweep_cell(cap, 100, rate, cap * 1448))
    assert main(["benchreport", path, "--table", "sweep", "--plots", str(tmp_path / "p")]) == 0
    out = capsys.readouterr()
    lines = out.out.splitlines()
    assert lines[0].startswith("| link | queue | cc |") and len(lines) == 5
    assert os.listdir(tmp_path / "p") == ["compete-vs-cap.png"] and "compete-vs-cap.png" in out.err
    single = tmp_path / "one.json"
    single.write_text(json.dumps(_competition("drs", [_flow("drs#1", "drs", 0.05, 13 << 10)], rate=56e3)))
    assert main(["benchreport", str(single), "--table", "window", "--plots", str(tmp_path / "w")]) == 0
    assert "| drs#1 |" in capsys.readouterr().out and os.listdir(tmp_path / "w") == ["compete-window.png"]
    # without --table: each competition's own tables; a slimmed one draws no goodput plot
    assert main(["benchreport", path, "--plots", str(tmp_path / "q")]) == 0
    assert capsys.readouterr().out.count("| kind | flows |") == 3 and os.listdir(tmp_path / "q") == [
        "compete-vs-cap.png"]


def test_a_sets_goodput_plots_are_named_by_spec_link_and_congestion_control(tmp_path, capsys):
    path = str(tmp_path / "set.json")
    for cc in ("reno", "bbr"):  # the same spec and link: only the congestion control tells them apart
        add_to_set(path, _competition("drs:1MiB", [_flow("drs:1MiB#1", "drs:1MiB", 5.0, 1 << 20)], cc=cc,
                                      rate=20e6), sample_every=1.0)
    assert main(["benchreport", path, "--plots", str(tmp_path / "p")]) == 0
    capsys.readouterr()
    assert sorted(os.listdir(tmp_path / "p")) == [f"compete-drs_1MiB-20mbit-60ms-q100-{cc}-goodput.png"
                                                  for cc in ("bbr", "reno")] + ["compete-vs-cap.png"]


@pytest.mark.parametrize("argv,message", [
    (["--table", "speed"], "--table speed applies to bench results, not compete results (those take --plots and "
                           "--table sweep or window or sharing or medians)"),
])
def test_a_bench_table_of_compete_results_is_one_sentence(argv, message, tmp_path, capsys):
    p = tmp_path / "c.json"
    p.write_text(json.dumps(_sweep_cell(100, 100, 18.0, 144800)))
    assert main(["benchreport", str(p), *argv]) == 2
    assert capsys.readouterr().err.strip() == f"drsftp: error: {message}"


def test_a_compete_table_of_bench_results_is_one_sentence(capsys):
    csv = os.path.join(ROOT, "docs", "bench-data", "all-tunings-get-no-loss.csv")
    assert main(["benchreport", csv, "--table", "sweep"]) == 2
    assert capsys.readouterr().err.strip() == ("drsftp: error: --table sweep applies to compete results "
                                               "(drsftp bench compete)")


@pytest.mark.parametrize("content,message", [
    ({"compete_set": 1, "results": []}, "a set of compete results without its results"),
    ({"compete_set": 1, "results": [{"spec": "drs"}]}, "(result 1): it has no link"),
])
def test_a_damaged_set_is_one_sentence(content, message, tmp_path, capsys):
    p = tmp_path / "s.json"
    p.write_text(json.dumps(content))
    assert main(["benchreport", str(p)]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"drsftp: error: {p} is not the output of drsftp bench") and message in err
    assert err.count("\n") == 1


# ---------------------------------------------------------------- benchmarks/papers.py


def test_the_papers_cells_are_the_studys_sweeps_and_each_knows_its_result_in_the_set():
    papers = benchmark_module("papers")
    fig5 = papers.FIGURES["fig5"].cells
    assert len(fig5) == 3 * 8 and {c.queue for c in fig5} == {100, 500, 16384}
    assert [c.spec for c in fig5[:8]] == [f"10*stock-64k+1*drs:{n * 1448}" for n in range(100, 800, 100)] + [
        "10*stock-64k+1*drs"]
    cell = fig5[3]
    data = _competition(cell.spec, [_flow("x#1", "drs", 1.0, 1)], queue=cell.queue, rtt=0.06)
    data["duration_s"] = cell.duration
    assert cell.key() == cell_key(data)  # a cell in the set is not run again
    argv = cell.argv("OUT")
    assert argv[argv.index("compete") + 1] == cell.spec and "--force-buffers" in argv and argv[-1] == "OUT"
    low = papers.FIGURES["lowrate"]
    assert low.sample_every == 1.0 and {(c.rate, c.rtt, c.queue) for c in low.cells} == {("56kbit", "100ms", 20)}
