"""The old upload clock's head start, from runs timed with the new one.

    python benchmarks/upload_clock.py results.json [...]

The stock ftplib client once timed an upload from its first callback,
after the first 1 MiB block had gone (docs/decisions/0003-upload-clock.md).
Each `kernel` run now records that block's time (`first_block_s`); this
prints, per path, the kernel's Mbit/s as measured and as the old clock
would have read it, drs's, and drs / kernel both ways (medians).
"""

import collections
import json
import statistics
import sys


def main() -> None:
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    for path in sys.argv[1:]:
        paths: dict[tuple, dict[str, list[dict]]] = collections.defaultdict(lambda: collections.defaultdict(list))
        with open(path) as f:
            runs = json.load(f)["runs"]
        for r in runs:
            key = (r.get("profile"), r["rate_bps"], r["rtt_s"], r["loss"], r["direction"])
            paths[key][r["tuning"]].append(r)
        for (profile, rate, rtt, loss, direction), by in paths.items():
            kernel, drs = by.get("kernel"), by.get("drs")
            if not kernel or not drs:
                continue
            now = statistics.median(r["mbps"] for r in kernel)
            old = statistics.median(r["bytes"] * 8 / (r["seconds"] - (r.get("first_block_s") or 0)) / 1e6
                                    for r in kernel)
            head = statistics.median(r.get("first_block_s") or 0 for r in kernel)
            mine = statistics.median(r["mbps"] for r in drs)
            print(f"{profile} {rate / 1e6:g}M {rtt * 1e3:g}ms loss {loss:g} {direction}: first block {head:.2f} s;"
                  f" kernel {now:.1f} (old clock {old:.1f}), drs {mine:.1f}:"
                  f" {mine / now:.2f}x (old clock {mine / old:.2f}x)")


if __name__ == "__main__":
    main()
