"""Side-by-side code comparisons (A/B) from `drsftp bench` rounds, and the
sender-timeline figures the decision records quote.

    python benchmarks/ab_rounds.py DIR            # DIR/old-N/ and DIR/new-N/ rounds
    python benchmarks/ab_rounds.py --timeline results.json

An A/B is several rounds, each one `drsftp bench compare --reps 1 --out DIR/old-N`
from a git worktree of the code before, then `--out DIR/new-N` from the
code after (docs/BENCHMARKS.md, "How each file was measured").  This merges each side's rounds into
DIR/old.json and DIR/new.json, and DIR/old.csv and DIR/new.csv (the round
is the rep; the CSVs are what docs/bench-data keeps), prints each side's
tables as `drsftp benchreport` does, and each round's drs / kernel ratio.

--timeline: per run, the window the receiver offered (the sender's
`snd_wnd`, median and 90th percentile, x BDP), the share of samples in
which the sender was window-bound (in flight >= 90% of that window), and
the peaks of bytes in flight and of the offered window; the sender's
memory in use (skmem w) at its peak, split into bytes in flight and unsent
bytes, and its median (runs whose timeline has skmem and notsent), and the receiver's
memory in use (skmem r) at its peak; for the drsftp
client, how often its tuning decided a new size (the share of its ticks).
"""

import glob
import itertools
import json
import os
import statistics
import sys

from drsftp.bench.common.tunings import TUNINGS
from drsftp.bench.compare.report import markdown, write_csv


def merge(directory: str, side: str) -> tuple[dict, list[dict]]:
    env, runs = None, []
    paths = glob.glob(os.path.join(directory, f"{side}-*", "results.json"))
    for i, path in enumerate(sorted(paths, key=lambda p: int(os.path.basename(os.path.dirname(p)).split("-")[1]))):
        with open(path) as f:
            data = json.load(f)
        env = data["environment"]
        for r in data["runs"]:
            runs.append(dict(r, rep=i))
    if env is None:
        sys.exit(f"no {side}-N/results.json under {directory}")
    with open(os.path.join(directory, f"{side}.json"), "w") as f:
        json.dump({"environment": env, "tunings": {}, "runs": runs}, f)
    write_csv(runs, os.path.join(directory, f"{side}.csv"))
    return env, runs


def round_ratios(runs: list[dict]) -> dict[tuple, list[float]]:
    by = {(r["rate_bps"], r["rtt_s"], r["loss"], r["direction"], r["rep"], r["tuning"]): r["mbps"] for r in runs}
    out: dict[tuple, list[float]] = {}
    for (rate, rtt, loss, direction, rep, tuning), mbps in sorted(by.items()):
        kernel = by.get((rate, rtt, loss, direction, rep, "kernel"))
        if tuning == "drs" and kernel:
            out.setdefault((rate, rtt, loss, direction), []).append(round(mbps / kernel, 3))
    return out


def timeline_figures(path: str) -> None:
    with open(path) as f:
        runs = json.load(f)["runs"]
    for r in runs:
        bdp = r["rate_bps"] / 8 * r["rtt_s"]
        samples = [s for s in r.get("timeline") or [] if s.get("peer_window") and s.get("in_flight_bytes") is not None]
        if not samples:
            continue
        offered = sorted(s["peer_window"] for s in samples)
        bound = sum(s["in_flight_bytes"] >= 0.9 * s["peer_window"] for s in samples) / len(samples)
        print(f"{r['rate_bps'] / 1e6:g}M {r['rtt_s'] * 1e3:g}ms loss {r['loss']:g} {r['direction']} {r['tuning']:10}"
              f" rep {r['rep']}: {r['mbps']:6.1f} Mbit/s, offered window median {statistics.median(offered) / bdp:.2f}"
              f" p90 {offered[int(0.9 * len(offered))] / bdp:.2f} x BDP, window-bound {100 * bound:.0f}%;"
              f" peaks: in flight {max(s['in_flight_bytes'] for s in samples) / 1e6:.2f} MB,"
              f" offered {offered[-1] / 1e6:.2f} MB")
        used = [s for s in samples if s.get("snd_used")]
        if used:  # the sender's memory in use (skmem w), split at its peak; the receiver's peak (r)
            peak = max(used, key=lambda s: s["snd_used"])
            print(f"    sender memory in use: peak {peak['snd_used'] / bdp:.2f} x BDP (in flight"
                  f" {peak['in_flight_bytes'] / bdp:.2f}, unsent {(peak.get('notsent_bytes') or 0) / bdp:.2f}),"
                  f" median {statistics.median(s['snd_used'] for s in used) / bdp:.2f};"
                  f" receiver peak {(r.get('peak_rcv_used') or 0) / bdp:.2f}")
        decided = [c["window"] for c in r.get("client_timeline") or [] if c.get("window")]
        if len(decided) > 1:
            changed = sum(a != b for a, b in itertools.pairwise(decided)) / (len(decided) - 1)
            print(f"    client decisions: {len(decided)} ticks, a new size at {100 * changed:.0f}% of them")


def main() -> None:
    if len(sys.argv) == 3 and sys.argv[1] == "--timeline":
        timeline_figures(sys.argv[2])
        return
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    for side in ("old", "new"):
        env, runs = merge(sys.argv[1], side)
        print(f"## {side}\n\n{markdown(env, runs, list(TUNINGS))}\n")
        for key, ratios in round_ratios(runs).items():
            print(f"drs / kernel per round, {key}: {ratios}")
        print()


if __name__ == "__main__":
    main()
