"""Several competitions in one file: a sweep's cells (`drsftp bench
compete` at each cap, queue and congestion control) kept together, as
docs/bench-data keeps a figure's runs.

    {"compete_set": 1, "results": [<a compete results file's content>, ...]}

Each result is what `drsftp bench compete` writes, its flows' samples
left out or thinned (a sweep's samples would be megabytes; its tables and
the goodput-against-cap plot read the flows' figures only)."""

from __future__ import annotations

import json
import os
from typing import Any

Data = dict[str, Any]


def congestion_control(data: Data) -> str | None:
    """The congestion control the competition ran (the namespaces' sysctl, or the host's)."""
    cc = (data.get("link", {}).get("sysctls") or {}).get("net.ipv4.tcp_congestion_control")
    return cc or (data.get("environment") or {}).get("congestion_control")


def cell_key(data: Data) -> tuple:
    """What makes a cell of a sweep: its spec, link and congestion control."""
    link = data["link"]
    return (data["spec"], link["rate_bps"], link["rtt_s"], link["loss"], link["queue_packets"],
            congestion_control(data), data.get("duration_s"), bool((data.get("environment") or {}).get(
                "buffer_force_used")))


def thin(samples: list[dict], every: float) -> list[dict]:
    """At most one sample per ``every`` seconds (the first at or after each step), and the last."""
    out: list[dict] = []
    for s in samples:
        if not out or s["t"] >= out[-1]["t"] + every:
            out.append(s)
    if samples and out[-1] is not samples[-1]:
        out.append(samples[-1])
    return out


def slim(data: Data, sample_every: float | None = None) -> Data:
    """A copy without the flows' samples, or with one per ``sample_every``
    seconds (the flows' own figures, peaks included, stay as measured)."""
    out = dict(data)
    out["flows"] = [{**f, "samples": [] if sample_every is None else thin(f["samples"], sample_every)}
                    for f in data["flows"]]
    return out


def read_set(path: str) -> list[Data]:
    """A set's results (none if the file does not exist yet); not checked here (saved.read_results is)."""
    if not os.path.exists(path):
        return []
    with open(path, encoding="utf-8") as f:
        data = json.load(f)
    results = data.get("results") if isinstance(data, dict) and data.get("compete_set") else None
    if not isinstance(results, list):
        raise ValueError(f"{path} is not a set of compete results")
    return results


def add_to_set(path: str, data: Data, sample_every: float | None = None) -> list[Data]:
    """The set at ``path`` with ``data`` in it (replacing the same cell's
    earlier result; its samples as :func:`slim` keeps them), written back
    whole (a temporary file, then renamed)."""
    results = [r for r in read_set(path) if cell_key(r) != cell_key(data)]
    results.append(slim(data, sample_every))
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump({"compete_set": 1, "results": results}, f, separators=(",", ":"))
        f.write("\n")
    os.replace(tmp, path)
    return results
