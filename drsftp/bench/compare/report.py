"""Bench output: the terminal table, JSON/CSV of every run, and plots."""

from __future__ import annotations

import csv
import json
import os
import statistics
import textwrap
from collections import Counter, defaultdict

from rich import box
from rich.console import Console
from rich.table import Table

from ..common.tables import markdown_table, median
from ..common.tunings import DESCRIPTIONS


def _key(r: dict) -> tuple:
    return (r["profile"], r["rate_bps"], r["rtt_s"], r["loss"], r["direction"])


def group(results: list[dict]) -> dict:
    """{path key: {tuning: [mbps of each run]}} (failed runs left out), the paths in table order:
    profile, rate, RTT, direction, loss."""
    out: dict = defaultdict(lambda: defaultdict(list))
    for r in results:
        if not r.get("error"):
            out[_key(r)][r["tuning"]].append(r["mbps"])
    return dict(sorted(out.items(), key=lambda kv: (kv[0][0], kv[0][1], kv[0][2], kv[0][4], kv[0][3])))


def path_label(key: tuple) -> str:
    profile, rate, rtt, loss, direction = key
    r = f"{rate / 1e9:g}G" if rate >= 1e9 else f"{rate / 1e6:g}M"
    return f"{profile} {r} {rtt * 1000:g}ms" + (f" {loss * 100:g}%" if loss else "") + f" {direction}"


def write_files(env: dict, results: list[dict], outdir: str) -> dict[str, str]:
    os.makedirs(outdir, exist_ok=True)
    paths = {"json": os.path.join(outdir, "results.json"), "csv": os.path.join(outdir, "results.csv")}
    # written after every run: replace, never truncate, so a run stopped
    # mid-write keeps the file --resume reads
    tmp = paths["json"] + ".tmp"
    with open(tmp, "w") as f:
        json.dump({"environment": env, "tunings": DESCRIPTIONS, "runs": results}, f, indent=1)
    os.replace(tmp, paths["json"])
    write_csv(results, paths["csv"])
    return paths


def write_csv(results: list[dict], path: str) -> None:
    """One row per run: its configuration and figures, without timelines."""
    cols = ["profile", "rate_bps", "rtt_s", "loss", "direction", "tuning", "rep", "bytes", "seconds", "mbps",
            "complete", "ceiling_mbps", "peak_rcvbuf", "peak_sndbuf", "peak_rcv_used", "peak_snd_used",
            "retransmits", "rtt_min_ms", "rtt_avg_ms", "rtt_max_ms", "client_cpu_s", "server_cpu_s",
            "probe_size", "error", "client_kernel_owns"] + [name for name, _, _ in COUNTER_COLUMNS] + [
            "first_block_s", "commit"]
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=cols, extrasaction="ignore")
        w.writeheader()
        for r in results:
            w.writerow(dict(r, **csv_counters(r)))


# kernel counters per run (runner: tcp_counters), from the end that sees them
COUNTER_COLUMNS = (
    ("sender_timeouts", "sender", "TcpExt.TCPTimeouts"),
    ("sender_sack_reneging", "sender", "TcpExt.TCPSACKReneging"),
    ("receiver_ofo_pruned", "receiver", "TcpExt.OfoPruned"),
    ("receiver_prune_called", "receiver", "TcpExt.PruneCalled"),
)


def csv_counters(r: dict) -> dict:
    counters = r.get("tcp_counters")
    if not counters:
        return {}
    ends = {"sender": "server", "receiver": "client"} if r.get("direction") == "get" else {
        "sender": "client", "receiver": "server"}
    out = {"client_kernel_owns": (r.get("client_report") or {}).get("kernel_owns")}
    for name, end, key in COUNTER_COLUMNS:
        out[name] = counters.get(ends[end], {}).get(key, 0)
    return out


def plot(results: list[dict], outdir: str) -> list[str]:
    """Throughput against RTT (a panel per rate) and a DRS-vs-stock timeline."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return []
    made = []
    ok = [r for r in results if not r.get("error")]
    rates = sorted({r["rate_bps"] for r in ok})
    # one direction per picture: get where there is any, else put
    direction = "get" if any(r["direction"] == "get" for r in ok) else "put"
    if ok and len({r["rtt_s"] for r in ok}) > 1:
        fig, axes = plt.subplots(1, len(rates), figsize=(6 * len(rates), 4.5), squeeze=False)
        for ax, rate in zip(axes[0], rates):
            sel = [r for r in ok if r["rate_bps"] == rate and r["loss"] == 0 and r["direction"] == direction]
            for t in sorted({r["tuning"] for r in sel}):
                pts = defaultdict(list)
                for r in sel:
                    if r["tuning"] == t:
                        pts[r["rtt_s"] * 1000].append(r["mbps"])
                xs = sorted(pts)
                ax.plot(xs, [statistics.median(pts[x]) for x in xs], marker="o", label=t)
            ax.axhline(rate / 1e6 * 1448 / 1500, color="grey", ls=":", label="goodput ceiling")
            ax.set_title(f"{rate / 1e6:g} Mbit/s link, {direction}, no loss")
            ax.set_xlabel("RTT (ms)")
            ax.set_ylabel("throughput (Mbit/s)")
            ax.set_yscale("log")
            ax.grid(True, which="both", alpha=0.3)
            ax.legend(fontsize=8)
        fig.tight_layout()
        p = os.path.join(outdir, "throughput_vs_rtt.png")
        fig.savefig(p, dpi=110)
        plt.close(fig)
        made.append(p)
    pick = {}
    for t in ("drs", "stock-64k", "kernel"):
        cands = [r for r in ok if r["tuning"] == t and r.get("timeline") and r["direction"] == direction]
        if cands:
            pick[t] = max(cands, key=lambda r: (r["rtt_s"], r["rate_bps"]))
    if pick:
        fig, axes = plt.subplots(4, 1, figsize=(9, 11), sharex=True)
        for t, r in pick.items():
            tl, rtl = r["timeline"], r.get("receiver_timeline") or []
            ts = [s["t"] for s in tl]
            axes[0].plot([s["t"] for s in rtl], [(s["rcvbuf"] or 0) / 2 ** 20 for s in rtl],
                         label=f"{t} receiver rcvbuf")
            axes[0].plot(ts, [(s["peer_window"] or 0) / 2 ** 20 for s in tl], ls="--", label=f"{t} advertised window")
            axes[1].plot(ts, [(s["in_flight_bytes"] or 0) / 2 ** 20 for s in tl], label=f"{t} in flight")
            axes[2].plot(ts, [(s["rate_bps"] or 0) / 1e6 for s in tl], label=t)
            axes[3].plot(ts, [s["rtt_ms"] or 0 for s in tl], label=t)
        bdp = max(r["rate_bps"] / 8 * r["rtt_s"] for r in pick.values()) / 2 ** 20
        axes[1].axhline(bdp, color="grey", ls=":", label="BDP")
        for ax, lab in zip(axes, ("window / buffer (MiB)", "bytes in flight (MiB)", "throughput (Mbit/s)", "RTT (ms)")):
            ax.set_ylabel(lab)
            ax.grid(True, alpha=0.3)
            ax.legend(fontsize=7)
        r0 = next(iter(pick.values()))
        axes[0].set_title(f"One transfer each, {r0['rate_bps'] / 1e6:g} Mbit/s, {r0['rtt_s'] * 1000:g} ms "
                          f"(sender-side ss samples)")
        axes[3].set_xlabel("time (s)")
        fig.tight_layout()
        p = os.path.join(outdir, "timeline.png")
        fig.savefig(p, dpi=100)
        plt.close(fig)
        made.append(p)
    return made


# the CSV's columns and their types (write_csv); an empty cell reads as None
_CSV_TYPES = {"rate_bps": float, "rtt_s": float, "loss": float, "rep": int, "bytes": int, "seconds": float,
              "mbps": float, "ceiling_mbps": float, "peak_rcvbuf": int, "peak_sndbuf": int,
              "peak_rcv_used": int, "peak_snd_used": int, "retransmits": int, "rtt_min_ms": float,
              "rtt_avg_ms": float, "rtt_max_ms": float, "client_cpu_s": float, "server_cpu_s": float,
              "probe_size": int, "first_block_s": float}


def read_csv(path: str) -> list[dict]:
    """The runs of a results CSV (write_csv's columns), typed as in results.json."""
    runs = []
    with open(path, newline="") as f:
        reader = csv.DictReader(f)
        missing = [c for c in ("profile", "rate_bps", "rtt_s", "loss", "direction", "tuning", "mbps")
                   if c not in (reader.fieldnames or [])]
        if missing:
            raise ValueError(f"not a bench results CSV (no {', '.join(missing)} column)")
        for row in reader:
            run: dict = {}
            for name, text in row.items():
                if text == "" or text is None:
                    run[name] = None
                elif name in _CSV_TYPES:
                    run[name] = _CSV_TYPES[name](float(text)) if _CSV_TYPES[name] is int else float(text)
                elif name == "complete":
                    run[name] = text == "True"
                else:
                    run[name] = text
            runs.append(run)
    return runs


def merge_latest(sources: list[list[dict]]) -> list[dict]:
    """Runs of several files; where a later file holds a path, its runs replace the earlier files' runs
    of that path (so every ratio divides runs measured side by side)."""
    out: list[dict] = []
    for runs in sources:
        have = {_key(r) for r in runs}
        out = [r for r in out if _key(r) not in have] + list(runs)
    return out


TABLES = ("speed", "ratio", "buffer", "used", "queue", "cpu")


def tables(results: list[dict], tunings: list[str]) -> list[tuple[str, list[str], list[list[str]]]]:
    """(title, header, rows) of the six result tables (TABLES, in order), for any renderer."""
    groups = group(results)
    present = [t for t in tunings if any(t in g for g in groups.values())]
    speed: list[list[str]] = []
    ratio: list[list[str]] = []
    memory: list[list[str]] = []
    used: list[list[str]] = []
    queue: list[list[str]] = []
    cpu: list[list[str]] = []
    for key, by_t in groups.items():
        label = path_label(key)
        ceiling = next(r["ceiling_mbps"] for r in results if _key(r) == key)
        base_stock, base_kernel = median(by_t.get("stock-64k", [])), median(by_t.get("kernel", []))
        bdp = key[1] / 8 * key[2]
        rows = [[label] for _ in range(6)]
        for t in present:
            runs = [r for r in results if _key(r) == key and r["tuning"] == t and not r.get("error")]
            xs = by_t.get(t, [])
            m = median(xs)
            if m is None:
                for row in rows:
                    row.append("-")
                continue
            capped = "*" if any(not r.get("complete") for r in runs) else ""
            rows[0].append(f"{m:.1f}{capped}" + (f" [{min(xs):.1f}-{max(xs):.1f}]" if len(xs) > 1 else ""))
            rows[1].append(" / ".join([f"{m / base_stock:.1f}x" if base_stock else "-",
                                       f"{m / base_kernel:.2f}x" if base_kernel else "-",
                                       f"{100 * m / ceiling:.0f}%"]))
            rb = max((r.get("peak_rcvbuf") or 0 for r in runs), default=0)
            tb = max((r.get("peak_sndbuf") or 0 for r in runs), default=0)
            typical = (f" ({_typical(runs, 'receiver_timeline', 'rcvbuf', bdp)}"
                       f" / {_typical(runs, 'timeline', 'sndbuf', bdp)})")
            rows[2].append(f"{rb / bdp:.1f} / {tb / bdp:.1f}{typical}" if bdp else "-")
            # what the queues held, not the limits: `ss` skmem r / w
            r_used = median([r["peak_rcv_used"] for r in runs if r.get("peak_rcv_used") is not None])
            w_used = median([r["peak_snd_used"] for r in runs if r.get("peak_snd_used") is not None])
            rows[3].append(" / ".join(_times(x, bdp) for x in (r_used, w_used)))
            retr = median([r.get("retransmits") or 0 for r in runs])
            rtt = median([r["rtt_avg_ms"] for r in runs if r.get("rtt_avg_ms")])
            rows[4].append(f"{retr:.0f} / {rtt:.0f}" if rtt is not None else "-")
            rows[5].append(" / ".join(_per_gb(runs, side) for side in ("client_cpu_s", "server_cpu_s")))
        rows[0].append(f"{ceiling:.1f}")
        for table, row in zip((speed, ratio, memory, used, queue, cpu), rows):
            table.append(row)
    header = ["path"] + present
    return [
        ("Throughput, Mbit/s: median [min-max]; * = a run hit --max-time", header + ["ceiling"], speed),
        ("x stock-64k / x kernel / % of goodput ceiling (medians)", header, ratio),
        (("Socket buffer, x BDP: peak skmem rb at the receiver / tb at the sender "
          "(median over the transfer)"), header, memory),
        (("Socket memory in use, x BDP: peak skmem r at the receiver / w at the sender "
          "(median of the runs' peaks)"), header, used),
        ("Sender retransmits / average RTT in ms (medians; the queue a tuning builds)", header, queue),
        (("CPU seconds per GB moved: client / server process (medians; where a path is CPU-bound, "
          "this is what sets the rate)"), header, cpu),
    ]


def versus(results: list[dict], tunings: list[str], base: str = "kernel") -> tuple[list[str], list[list[str]]]:
    """One compact table: the base tuning's Mbit/s, each other tuning's median over it, and every
    tuning's retransmits and sender memory in use at its peak (x BDP), all medians over the runs."""
    groups = group(results)
    present = [t for t in tunings if any(t in g for g in groups.values())]
    others = [t for t in present if t != base]
    names = " / ".join(present)
    header = ["path", f"{base} Mbit/s"] + [f"{t} / {base}" for t in others] + [
        f"retransmits, {names}", f"sender memory in use at its peak, x BDP, {names}"]
    rows = []
    for key, by_t in groups.items():
        bdp = key[1] / 8 * key[2]
        b = median(by_t.get(base, []))
        row = [path_label(key), f"{b:.1f}" if b is not None else "-"]
        for t in others:
            m = median(by_t.get(t, []))
            row.append(f"{m / b:.2f}x" if m is not None and b else "-")
        retr, mem = [], []
        for t in present:
            runs = [r for r in results if _key(r) == key and r["tuning"] == t and not r.get("error")]
            x = median([r.get("retransmits") or 0 for r in runs])
            retr.append(f"{x:,.0f}" if x is not None else "-")
            mem.append(_times(median([r["peak_snd_used"] for r in runs if r.get("peak_snd_used") is not None]),
                              bdp))
        rows.append(row + [" / ".join(retr), " / ".join(mem)])
    return header, rows


def _times(x: float | None, bdp: float) -> str:
    if x is None or not bdp:
        return "-"
    return f"{x / bdp:.2f}" if x < bdp / 10 else f"{x / bdp:.1f}"


def _per_gb(runs: list[dict], field: str) -> str:
    m = median([r[field] / (r["bytes"] / 1e9) for r in runs if r.get(field) is not None and r.get("bytes")])
    return f"{m:.2f}" if m is not None else "-"


def _typical(runs: list[dict], timeline: str, field: str, bdp: float) -> str:
    """Median over each run's `ss` samples, median over the runs, x BDP."""
    per_run = [median([s[field] for s in r.get(timeline) or [] if s.get(field)]) for r in runs]
    m = median([x for x in per_run if x is not None])
    return f"{m / bdp:.1f}" if m is not None else "-"


def environment_line(env: dict) -> str:
    return (f"Kernel {env['kernel']}, {env['machine']}, congestion control {env['congestion_control']}, "
            f"buffer FORCE {'used' if env['buffer_force_used'] else 'not used'} "
            f"(available: {env['buffer_force_available']}); host rmem_max "
            f"{env['host_sysctls']['net.core.rmem_max']}, wmem_max {env['host_sysctls']['net.core.wmem_max']}, "
            f"tcp_wmem {env['host_sysctls']['net.ipv4.tcp_wmem']}; {env['date']}"
            + (f"; drsftp {env['commit']}." if env.get("commit") else "."))


def path_tables(results: list[dict], tunings: list[str]) -> list[tuple[str, list[str], list[list[str]]]]:
    """(title, header, rows) per path, a row per tuning: the demo's view, in 80 columns."""
    out = []
    for key, by_t in group(results).items():
        profile, rate, rtt, loss, direction = key
        runs = [r for r in results if _key(r) == key and not r.get("error")]
        ceiling = runs[0]["ceiling_mbps"]
        bdp = rate / 8 * rtt
        base_stock, base_kernel = median(by_t.get("stock-64k", [])), median(by_t.get("kernel", []))
        rows = []
        for t in [t for t in tunings if t in by_t]:
            mine = [r for r in runs if r["tuning"] == t]
            m = median(by_t[t]) or 0.0
            capped = "*" if any(not r.get("complete") for r in mine) else ""
            rb = max((r.get("peak_rcvbuf") or 0 for r in mine), default=0)
            rtt_ms = median([r["rtt_avg_ms"] for r in mine if r.get("rtt_avg_ms")])
            rows.append([t, f"{m:.1f}{capped}", _ratio(m, base_stock), _ratio(m, base_kernel),
                         f"{100 * m / ceiling:.0f}%" if ceiling else "-",
                         f"{rb / bdp:.1f}" if bdp and rb else "-", f"{rtt_ms:.0f}" if rtt_ms else "-"])
        r_label = f"{rate / 1e9:g} Gbit/s" if rate >= 1e9 else f"{rate / 1e6:g} Mbit/s"
        title = (f"{direction}, {r_label}, RTT {rtt * 1000:g} ms" + (f", loss {loss * 100:g}%" if loss else "")
                 + f", {profile} profile (medians)")
        out.append((title, ["tuning", "Mbit/s", "vs 64k", "vs kernel", "of ceiling", "rcvbuf/BDP", "RTT ms"], rows))
    return out


def _ratio(m: float, base: float | None) -> str:
    if not base:
        return "-"
    return f"{m / base:.1f}x" if m / base >= 10 else f"{m / base:.2f}x"


def legend(results: list[dict], tunings: list[str], full: bool, width: int = 80) -> list[str]:
    """What the tables' words mean, for the tunings that ran."""
    present = [t for t in tunings if any(r["tuning"] == t for r in results)]
    lines = [f"{t}: {DESCRIPTIONS.get(t, t)}." for t in present]
    lines += [
        ("x stock-64k, x kernel" if full else "vs 64k, vs kernel") + ": the rate over stock-64k's and kernel's.",
        "ceiling: the most TCP can carry on the link (1448 payload bytes per 1500-byte packet).",
        "BDP: rate x RTT, the bytes the path holds in flight; * marks a run stopped at --max-time.",
        "default profile: the host's TCP settings as they are (tuned: tcp_rmem/tcp_wmem max 64 MiB).",
    ]
    if not full:
        lines.insert(len(present) + 1, "rcvbuf/BDP: the receiver's peak socket buffer over the BDP.")
    if full:
        lines.append("skmem: socket memory as `ss -m` shows it (rb/tb: buffer sizes, r/w: bytes held).")
    return ["Legend:"] + [textwrap.fill(line, width, initial_indent="  ", subsequent_indent="      ")
                          for line in lines]


_SPOKEN = {"kernel": "kernel autotuning"}


def verdict(results: list[dict], tunings: list[str]) -> str:
    """One sentence: which tuning was fastest, and by how much, from the medians."""
    medians = {key: {t: statistics.median(xs) for t, xs in by_t.items() if xs}
               for key, by_t in group(results).items()}
    medians = {k: v for k, v in medians.items() if v}
    if not medians:
        return "No run completed, so nothing can be compared."
    order = {t: i for i, t in enumerate(tunings)}
    wins = Counter(max(by_t, key=lambda t: by_t[t]) for by_t in medians.values())
    winner = max(wins, key=lambda t: (wins[t], -order.get(t, len(order))))
    others = sorted({t for by_t in medians.values() for t in by_t} - {winner},
                    key=lambda t: order.get(t, len(order)))
    parts = []
    for t in others:
        ratios = [by_t[winner] / by_t[t] for by_t in medians.values() if winner in by_t and by_t.get(t)]
        if ratios:
            parts.append(f"{_ratio(statistics.median(ratios), 1.0)} {_SPOKEN.get(t, t)}")
    if not parts:
        return f"Only {winner} completed a run; there is nothing to compare it with."
    moved = parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]
    if len(medians) == 1:
        return f"{winner} moved {moved} on this path."
    return (f"{winner} was fastest on {wins[winner]} of {len(medians)} paths and moved {moved}"
            " (medians over the paths).")


def print_table(env: dict, results: list[dict], tunings: list[str], console: Console | None = None,
                compact: bool = False) -> None:
    """The tables and a legend (the caller ends with :func:`verdict`).  ``compact``: one table per path
    that fits 80 columns (the demo), else the six full tables, folded by
    rich where the terminal is narrower."""
    console = console or Console()
    shown = path_tables(results, tunings) if compact else tables(results, tunings)
    for title, header, rows in shown:
        t = Table(title=title, box=box.SIMPLE_HEAD if compact else box.HEAVY_HEAD)
        for i, h in enumerate(header):
            t.add_column(h, justify="left" if i == 0 else "right", overflow="fold")
        for row in rows:
            t.add_row(*row)
        console.print(t)
    console.print(environment_line(env))
    incomplete = sum(1 for r in results if not r.get("complete") and not r.get("error"))
    if incomplete:
        console.print(f"{incomplete} run(s) hit --max-time: their rate is over the time they ran")
    for r in results:
        if r.get("error"):
            console.print(f"FAILED {r['tuning']} {path_label(_key(r))}: {r['error']}")
    console.print("\n".join(legend(results, tunings, full=not compact, width=min(console.width, 100))),
                  highlight=False)


def markdown(env: dict | None, results: list[dict], tunings: list[str], table: str | None = None,
             base: str = "kernel") -> str:
    """The same tables as print_table, as Markdown; with `table` (one of TABLES, or "versus") that
    table alone, as docs/BENCHMARKS.md quotes it. env is None for runs read from a CSV."""
    if table == "versus":
        return "\n".join(markdown_table(*versus(results, tunings, base)))
    if table is not None:
        _, header, rows = tables(results, tunings)[TABLES.index(table)]
        return "\n".join(markdown_table(header, rows))
    out = []
    for title, header, rows in tables(results, tunings):
        out += [f"**{title}**", ""] + markdown_table(header, rows) + [""]
    if env:
        out.append(environment_line(env))
    return "\n".join(out)
