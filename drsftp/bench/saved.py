"""Saved bench results read back (benchreport, bench --resume): the shape is
checked once, where a file is read, so a file that is not the bench's, or
is damaged, is one sentence and never a KeyError in a table."""

from __future__ import annotations

import csv
import json
import math
from dataclasses import dataclass
from typing import Any

from ..netem.errors import NetemError


@dataclass
class Saved:
    kind: str  # "bench" (drsftp bench) | "field" (bench field) | "compete" (bench compete)
    #            | "third-party" (bench third-party) | "smallfiles" (bench smallfiles)
    runs: list[dict]  # compete: the flows
    env: dict | None = None  # the bench's environment; None for a CSV or field results
    data: dict | None = None  # compete, third-party: the whole file (its link or topology, and the rest)
    results: list[dict] | None = None  # compete: each competition's data (one, or a set's: bench/competeset.py)


def _number(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def _opt_number(x: Any) -> bool:
    return x is None or _number(x)


_SAMPLE_FIGURES = ("rcvbuf", "sndbuf", "peer_window", "in_flight_bytes", "rate_bps", "rtt_ms")


def _samples(x: Any) -> bool:
    """A sender's or receiver's `ss` timeline: each sample a time and the figures the plots read."""
    return x is None or (isinstance(x, list) and all(
        isinstance(s, dict) and _number(s.get("t")) and all(_opt_number(s.get(k)) for k in _SAMPLE_FIGURES)
        for s in x))


# what report.py reads of a bench run: (field, check, required)
_BENCH_RUN = (
    ("profile", lambda x: isinstance(x, str), True),
    ("direction", lambda x: x in ("get", "put"), True),
    ("tuning", lambda x: isinstance(x, str), True),
    ("rep", lambda x: _number(x) and x >= 0, True),
    ("rate_bps", lambda x: _number(x) and x > 0, True),
    ("rtt_s", lambda x: _number(x) and x >= 0, True),
    ("loss", lambda x: _number(x) and 0 <= x <= 1, True),
    ("ceiling_mbps", lambda x: _number(x) and x > 0, True),
    ("mbps", lambda x: _number(x) and x >= 0, True),
    ("complete", lambda x: x is None or isinstance(x, bool), False),
    ("error", lambda x: x is None or isinstance(x, str), False),
    *((name, _opt_number, False) for name in (
        "bytes", "seconds", "peak_rcvbuf", "peak_sndbuf", "peak_rcv_used", "peak_snd_used", "retransmits",
        "rtt_min_ms", "rtt_avg_ms", "rtt_max_ms", "client_cpu_s", "server_cpu_s", "probe_size", "first_block_s")),
    *((name, _samples, False) for name in ("timeline", "receiver_timeline")),
    ("client_report", lambda x: x is None or isinstance(x, dict), False),
    ("tcp_counters", lambda x: x is None or (isinstance(x, dict) and all(
        isinstance(c, dict) and all(_number(n) for n in c.values()) for c in x.values())), False),
)

# what field.table reads of a field run
_FIELD_RUN = (
    ("entry", lambda x: isinstance(x, str), True),
    ("workload", lambda x: isinstance(x, str), True),
    ("complete", lambda x: isinstance(x, bool), True),
    ("mbps", lambda x: _number(x) and x >= 0, True),
    ("ceiling_mbps", lambda x: _number(x) and x > 0, True),
    ("bdp", lambda x: _number(x) and x > 0, True),
    ("files", lambda x: _number(x) and x >= 0, True),
    ("bytes", lambda x: _number(x) and x >= 0, True),
    ("peak_snd_used", lambda x: _number(x) and x >= 0, True),
    ("peak_rcv_used", lambda x: _number(x) and x >= 0, True),
    ("data_mbps", _opt_number, False),
    ("error", lambda x: x is None or isinstance(x, str), False),
)

# what thirdparty/report.py reads of a third-party run (thirdparty/run.py)
_THIRD_RUN = (
    *_FIELD_RUN,
    ("entry", lambda x: isinstance(x, str), True),
    ("third_party", lambda x: isinstance(x, bool), True),
    ("control_rtt_s", lambda x: _number(x) and x >= 0, True),
    ("bytes_identical", lambda x: isinstance(x, bool), True),
    *((name, _opt_number, False) for name in ("ss_rtt_ms", "load1", "cpu_busy_pct", "forwarder_cpu_pct", "cpu_a_s",
                                              "cpu_b_s")),
    ("client_report", lambda x: x is None or (isinstance(x, dict) and all(
        _opt_number(x.get(k)) for k in ("source_rtt_ms", "dest_rtt_ms", "source_cwnd_max", "source_sndbuf_max",
                                        "dest_wnd_max", "dest_rcvbuf_max", "sessions_max", "data_rtt_first_ms"))
        and all(isinstance(c, dict) and _number(c.get("t")) and _number(c.get("streams"))
                for c in x.get("stream_changes") or [])), False),
)
# what smallfiles/run.py's table reads of a run
_SMALL_RUN = (
    ("entry", lambda x: isinstance(x, str), True),
    ("direction", lambda x: x in ("get", "put"), True),
    ("files", lambda x: _number(x) and x >= 1, True),
    ("ok", lambda x: isinstance(x, bool), True),
    ("seconds", lambda x: _number(x) and x >= 0, False),
    ("client_peak_rss", lambda x: _number(x) and x >= 0, True),
    ("server_peak_rss", lambda x: _number(x) and x >= 0, True),
)
_BOUNCE = (("port_to", lambda x: isinstance(x, str), True), ("reply", lambda x: isinstance(x, str), True),
           ("listed", lambda x: isinstance(x, list) and all(isinstance(a, str) for a in x), True),
           ("refused", lambda x: isinstance(x, bool), True))


def _kind(x: Any) -> bool:
    from .compete.spec import check_kind

    try:
        return isinstance(x, str) and check_kind(x) == x
    except ValueError:
        return False


def _numbers(x: Any) -> bool:
    return isinstance(x, list) and all(_number(v) for v in x)


def _compete_samples(x: Any) -> bool:
    return isinstance(x, list) and all(
        isinstance(s, dict) and _number(s.get("t")) and _number(s.get("rcvbuf")) and _number(s.get("bytes"))
        and all(_opt_number(s.get(k)) for k in ("snd_wnd", "inflight", "retrans")) for s in x)


# what compete/report.py reads of a flow of `drsftp bench compete`
_COMPETE_FLOW = (
    ("label", lambda x: isinstance(x, str), True),
    ("kind", _kind, True),
    ("mbps", lambda x: _number(x) and x >= 0, True),
    ("bytes", lambda x: _number(x) and x >= 0, True),
    ("start_s", lambda x: _number(x) and x >= 0, True),
    ("per_second", _numbers, True),
    ("samples", _compete_samples, True),
    ("error", lambda x: x is None or isinstance(x, str), False),
    *((name, lambda x: x is None or (_number(x) and x >= 0), False) for name in (
        "end_s", "first_byte_s", "rcvbuf_mean", "sndbuf_mean", "retransmits", "wnd_mean", "wnd_peak",
        "inflight_mean", "inflight_peak")),
)

# and of the file around them
_COMPETE_FILE = (
    ("spec", lambda x: isinstance(x, str), True),
    ("link", lambda x: isinstance(x, dict) and all(_number(x.get(k)) and x[k] >= 0 for k in (
        "rate_bps", "rtt_s", "loss", "queue_packets")) and _number(x.get("ceiling_mbps")) and x["ceiling_mbps"] > 0,
     True),
    ("duration_s", lambda x: x is None or (_number(x) and x > 0), False),
    ("file_size", lambda x: _number(x) and x > 0, True),
)

_ENVIRONMENT = ("date", "kernel", "machine", "congestion_control", "buffer_force_used", "buffer_force_available",
                "host_sysctls")
_HOST_SYSCTLS = ("net.core.rmem_max", "net.core.wmem_max", "net.ipv4.tcp_wmem")


def check_runs(runs: Any, fields: tuple, what: str, noun: str = "run") -> list[dict]:
    """The runs, or NetemError naming the first run and field that is wrong."""
    if not isinstance(runs, list):
        raise NetemError(f"{what}: its {noun}s are not a list")
    for i, run in enumerate(runs, 1):
        if not isinstance(run, dict):
            raise NetemError(f"{what}: {noun} {i} is not an object")
        check_fields(run, fields, what, f"{noun} {i}")
    return runs


def check_fields(obj: dict, fields: tuple, what: str, who: str = "it") -> None:
    """NetemError naming the first of ``fields`` that ``obj`` lacks or holds wrong."""
    for name, ok, required in fields:
        if name not in obj or (obj[name] is None and required):
            if required:
                raise NetemError(f"{what}: {who} has no {name}")
        elif not ok(obj[name]):
            raise NetemError(f"{what}: {who} has a bad {name} ({str(obj[name])[:40]!r})")


def _compete_flows(data: dict, what: str) -> list[dict]:
    check_fields(data, _COMPETE_FILE, what)
    return check_runs(data.get("flows"), _COMPETE_FLOW, what, "flow")


def read_results(path: str) -> Saved:
    """The runs of a results.json or results.csv of `drsftp bench`, a
    field.json of `drsftp bench field`, or the flows
    of a compete-*.json of `drsftp bench compete` (or of a set of them)."""
    from .compare.report import read_csv

    what = f"{path} is not the output of drsftp bench"
    if path.endswith(".csv"):
        try:
            runs = read_csv(path)
        except (ValueError, OverflowError, csv.Error) as exc:  # (UnicodeDecodeError is a ValueError)
            raise NetemError(f"cannot read {path}: {exc}") from None
        return Saved("bench", check_runs(runs, _BENCH_RUN, what))
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except RecursionError:
        raise NetemError(f"cannot read {path}: its JSON is nested too deep") from None
    except ValueError as exc:  # (UnicodeDecodeError is a ValueError)
        raise NetemError(f"cannot read {path}: not JSON ({exc})") from None
    if not isinstance(data, dict):
        raise NetemError(f"{what}: it holds no object")
    if data.get("compete"):
        return Saved("compete", _compete_flows(data, what), data.get("environment"), data, [data])
    if data.get("compete_set"):
        results = data.get("results")
        if not isinstance(results, list) or not results or not all(isinstance(r, dict) for r in results):
            raise NetemError(f"{what}: a set of compete results without its results")
        flows = [f for i, r in enumerate(results, 1) for f in _compete_flows(r, f"{what} (result {i})")]
        return Saved("compete", flows, results[0].get("environment"), None, results)
    if data.get("third_party"):
        if data.get("bounce") is not None:
            if not isinstance(data["bounce"], dict):
                raise NetemError(f"{what}: its bounce check is not an object")
            check_fields(data["bounce"], _BOUNCE, what, "its bounce check")
        check_runs(data.get("runs"), _THIRD_RUN, what)
        return Saved("third-party", data["runs"], data=data)
    if data.get("smallfiles"):
        check_runs(data.get("runs"), _SMALL_RUN, what)
        return Saved("smallfiles", data["runs"], data=data)
    if data.get("field"):
        if "results" not in data:
            raise NetemError(f"{what}: field results without their runs")
        return Saved("field", check_runs(data["results"], _FIELD_RUN, what))
    env = data.get("environment")
    if env is None or "runs" not in data:
        raise NetemError(f"{what}: it has no {'environment' if env is None else 'runs'}")
    if not isinstance(env, dict) or any(k not in env for k in _ENVIRONMENT) or not isinstance(
            env["host_sysctls"], dict) or any(k not in env["host_sysctls"] for k in _HOST_SYSCTLS):
        raise NetemError(f"{what}: its environment is incomplete")
    return Saved("bench", check_runs(data["runs"], _BENCH_RUN, what), env)
