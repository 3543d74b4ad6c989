"""The tables of `drsftp bench third-party` (thirdparty/run.py) and of
`drsftp benchreport third-party.json` (docs/BENCHMARKS.md, "Third-party")."""

from __future__ import annotations

import statistics

from ..common.tables import median

MiB, MB = 1 << 20, 1e6
# what each workload's ratios divide by: GridFTP's third-party run, then the direct get over A-B
REFERENCES = {"big": ("gridftp-p4-16M", "get-Pauto-on-b"), "small": ("gridftp-fast", "get-r-on-b")}


def _f(x: float | None, fmt: str = ".0f") -> str:
    return "-" if x is None else format(x, fmt)


def entry_table(runs: list[dict], workload: str, references: tuple[str, ...] | None = None) -> str:
    """Per entry: the median Mbit/s [min-max] on the wall clock, its ratio
    to each reference entry's median, the data phase, the kernel's RTT on
    A's data sockets, the most both ends' data sockets held (BDP), how many
    runs arrived byte-identical."""
    rows = [r for r in runs if r["workload"] == workload]
    if not rows:
        return ""
    present = {r["entry"] for r in rows}
    refs = [e for e in (references or REFERENCES.get(workload) or ()) if e in present]
    ref_m = {e: median([r["mbps"] for r in rows if r["entry"] == e and r["complete"]]) for e in refs}
    bdp, ceiling = rows[0]["bdp"], rows[0]["ceiling_mbps"]
    lines = ["| entry | Mbit/s | " + "".join(f"x {e} | " for e in refs)
             + "data phase, Mbit/s | % ceiling | A's RTT (ss), ms | sender mem, BDP | receiver mem, BDP "
               "| servers' CPU A / B, s | byte-identical | runs |",
             "|---|---|" + "---|" * len(refs) + "---|---|---|---|---|---|---|---|"]
    for name in dict.fromkeys(r["entry"] for r in rows):
        rs = [r for r in rows if r["entry"] == name]
        done = [r for r in rs if r["complete"]]
        same = f"{sum(1 for r in rs if r.get('bytes_identical'))}/{len(rs)}"
        if not done:
            lines.append(f"| {name} | failed: {rs[0].get('error', '?')} | " + "| " * len(refs)
                         + f"| | | | | | {same} | 0/{len(rs)} |")
            continue
        ok = [r["mbps"] for r in done]
        m = statistics.median(ok)
        ratios = "".join(f"{m / ref_m[e]:.2f} | " if ref_m[e] else "- | " for e in refs)
        phase = median([r.get("data_mbps") for r in done])
        share = f"{100 * phase / ceiling:.0f}%" if phase else "-"
        lines.append(f"| {name} | {m:.0f} [{min(ok):.0f}-{max(ok):.0f}] | {ratios}{_f(phase)} | {share} | "
                     f"{_f(median([r.get('ss_rtt_ms') for r in done]))} | "
                     f"{_f(median([r['peak_snd_used'] / bdp for r in done]), '.1f')} | "
                     f"{_f(median([r['peak_rcv_used'] / bdp for r in done]), '.1f')} | {_cpu(done)} | {same} | "
                     f"{len(ok)}/{len(rs)} |")
    return "\n".join(lines)


def _cpu(runs: list[dict]) -> str:
    """The servers' CPU over a run, medians: A's / B's (a direct run's B is the client: not counted)."""
    a = _f(median([r.get("cpu_a_s") for r in runs]), ".2f")
    b = _f(median([r.get("cpu_b_s") for r in runs]), ".2f") if runs[0].get("third_party") else "-"
    return f"{a} / {b}"


def _span(xs: list[float], fmt: str) -> str:
    lo, hi = format(min(xs), fmt), format(max(xs), fmt)
    return lo if lo == hi else f"{lo}-{hi}"


def first_decisions(reps: list[dict]) -> str:
    """-P auto's first move over the runs: from how many streams to how
    many, when, on which data-path RTT (``-P N``: N, fixed)."""
    if any(x.get("streams_start") is None for x in reps):
        return f"{_span([x.get('streams') or 0 for x in reps], '.0f')} (fixed)"
    moved = [x for x in reps if x.get("stream_changes")]
    if not moved:
        return f"{_span([x['streams_start'] for x in reps], '.0f')}, kept"
    ends = "/".join(dict.fromkeys(str(x["stream_changes"][0]["streams"]) for x in moved))
    rtts = [x["data_rtt_first_ms"] for x in moved if x.get("data_rtt_first_ms")]
    return (f"{_span([x['streams_start'] for x in moved], '.0f')} -> {ends} at "
            f"{_span([x['stream_changes'][0]['t'] for x in moved], '.2f')} s"
            + (f" (RTT {_span(rtts, '.0f')} ms)" if rtts else "") + f", {len(moved)}/{len(reps)} runs")


def drs_table(runs: list[dict]) -> str:
    """drsftp's copies: what the servers reported over DRS (medians over the
    runs), beside the control connections' RTT and the kernel's RTT on A's
    data sockets; the first -P auto decision of each run."""
    rows = [r for r in runs if r.get("third_party") and r.get("client_report") and r["complete"]
            and r.get("servers", "drsftp") == "drsftp"]  # (an HTTP copy's --json holds no DRS reports)
    if not rows:
        return ""
    lines = ["| entry | control RTT, ms | A's DRS rtt_us, ms | B's DRS rtt_us, ms | A's RTT (ss), ms "
             "| A's cwnd / sndbuf at most, MB | B's window / rcvbuf at most, MB | streams: first decision | runs |",
             "|---|---|---|---|---|---|---|---|---|"]
    for name in dict.fromkeys(r["entry"] for r in rows):
        rs = [r for r in rows if r["entry"] == name]
        reps = [r["client_report"] for r in rs]

        def mb(key: str, reps=reps) -> str:
            return _f(median([x[key] / MB for x in reps if x.get(key)]), ".1f")
        firsts = first_decisions(reps) if "files" not in reps[0] else \
            f"{_f(median([x.get('sessions_max') for x in reps]))} pairs at most"
        a_rtt, b_rtt = (_f(median([x.get(k) for x in reps])) for k in ("source_rtt_ms", "dest_rtt_ms"))
        lines.append(f"| {name} | {rs[0]['control_rtt_s'] * 1000:g} | {a_rtt} | {b_rtt} | "
                     f"{_f(median([r.get('ss_rtt_ms') for r in rs]))} | {mb('source_cwnd_max')} / "
                     f"{mb('source_sndbuf_max')} | {mb('dest_wnd_max')} / {mb('dest_rcvbuf_max')} | {firsts} | "
                     f"{len(rs)} |")
    return "\n".join(lines)


def load_line(runs: list[dict]) -> str:
    """The machine while the runs ran: 1-minute load, CPU busy, the netem forwarder's share."""
    load: list[float] = [r["load1"] for r in runs if r.get("load1") is not None]
    busy = median([r.get("cpu_busy_pct") for r in runs])
    fwd = median([r.get("forwarder_cpu_pct") for r in runs])
    if not load:
        return ""
    return (f"Load (1 min) at the runs' starts: median {statistics.median(load):.2f} [{min(load):.2f}-"
            f"{max(load):.2f}] on {runs[0].get('cores', '?')} cores; CPU busy during a run: median "
            f"{_f(busy)}%; the netem forwarder: {_f(fwd)}% of a core.")


def bounce_line(bounce: dict | None) -> str:
    if not bounce:
        return "Bounce check: not run."
    verdict = "refused" if bounce.get("refused") else "NOT refused"
    return (f"Bounce check: PORT {bounce['port_to']} to A (listing {', '.join(bounce['listed'])}) "
            f"{verdict}: `{bounce['reply']}`")


def report(data: dict, workload: str | None = None, references: tuple[str, ...] | None = None) -> str:
    """Every table of a third-party result (one workload's alone, untitled, with ``workload``)."""
    runs = data["runs"]
    wls = [workload] if workload else list(dict.fromkeys(r["workload"] for r in runs))
    if workload:
        return entry_table(runs, workload, references)
    out = [f"Topology: {', '.join(data.get('topology') or [])}", ""]
    for wl in wls:
        one = next(r for r in runs if r["workload"] == wl)
        out += [f"**{wl}** ({one['files']} files, {one['bytes'] / MiB:.0f} MiB)", "",
                entry_table(runs, wl, references), ""]
    drs = drs_table(runs)
    if drs:
        out += ["**DRS on the data path** (drsftp copy --json)", "", drs, ""]
    out += [bounce_line(data.get("bounce")), "", load_line(runs)]
    return "\n".join(out).rstrip() + "\n"
