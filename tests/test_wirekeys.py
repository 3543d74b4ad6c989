"""drsftp/tuning/wirekeys.py: the DRS command's keys (docs/PROTOCOL.md,
"Keys"), named once for the grammar, a session's sums and the reports; no
other module writes one as a string of its own."""

import ast
import re
from pathlib import Path

from drsftp.ftp import drscmd, drsexchange
from drsftp.tuning import wirekeys
from drsftp.tuning.count import sharing

NAMES = ("rtt_us", "cwnd", "inflight", "wnd", "rate", "bytes", "rcvbuf", "sndbuf", "retrans", "streams",
         "busy_us", "rwnd_lim_us", "sndbuf_lim_us")


def test_the_keys_are_docs_protocol_names_and_fit_the_grammar():
    keys = {v for k, v in vars(wirekeys).items() if k.isupper() and isinstance(v, str)}
    assert keys == set(NAMES)
    assert all(re.fullmatch(r"[a-z][a-z0-9_]{0,15}", k) for k in keys)


def test_every_bounded_key_is_a_key_and_no_key_has_two_bounds():
    assert set(wirekeys.FIELDS) | set(wirekeys.EXTRA_BOUNDS) <= set(NAMES)
    assert not set(wirekeys.FIELDS) & set(wirekeys.EXTRA_BOUNDS)
    assert set(wirekeys.LIMIT_KEYS) == {"busy_us", "rwnd_lim_us", "sndbuf_lim_us"}


def test_a_session_sums_every_count_and_splits_only_the_peers_flow_figures():
    assert set(wirekeys.SUMMED) == set(NAMES) - {"rtt_us", "streams"}
    assert set(wirekeys.SHARED) == {"bytes", "rate", "wnd", "inflight", "cwnd"}
    assert set(wirekeys.SHARED) <= set(wirekeys.SUMMED)


def test_the_grammar_the_exchange_and_the_sharing_read_the_same_keys():
    assert drscmd.FIELDS is wirekeys.FIELDS and drscmd.EXTRA_BOUNDS is wirekeys.EXTRA_BOUNDS
    assert drsexchange.SUMMED is wirekeys.SUMMED and drsexchange.SHARED is wirekeys.SHARED
    assert sharing.LIMIT_KEYS is wirekeys.LIMIT_KEYS


# -- one home: no module writes a key as a string of its own ----------------------------
ROOT = Path(__file__).resolve().parent.parent
WIRE = {v for k, v in vars(wirekeys).items() if k.isupper() and isinstance(v, str)} | set(wirekeys.NOTHING_MEASURED)
# folders with figures of their own, never DRS pairs: the link emulator's link
# rate (it imports nothing of tuning, pyproject.toml), the bench's ss samples
# and result files; the bench's one reader of DRS rows is scanned
OWN_FIGURES = ("drsftp/netem/", "drsftp/bench/")
DRS_READERS = ("drsftp/bench/thirdparty/summary.py",)  # a copy's --json rows: the servers' DRS replies
KERNEL_OWNS = "which buffer is left to kernel autotuning (SocketController.kernel_owns)"
RANGE_UNIT = "the Range header's unit (RFC 9110 14.1.1)"
# a module -> the key-named strings it uses for something else, and what
ALLOWED = {
    "drsftp/http/ranges.py": ({"bytes"}, RANGE_UNIT),
    "drsftp/http/spans.py": ({"bytes"}, RANGE_UNIT),
    "drsftp/client/http/get.py": ({"bytes"}, RANGE_UNIT),
    "drsftp/server/http/files.py": ({"bytes"}, RANGE_UNIT),
    "drsftp/io/sockopt.py": ({"retrans"}, "a struct tcp_info field"),
    "drsftp/io/tuner.py": ({"rcvbuf", "sndbuf"}, KERNEL_OWNS),
    "drsftp/tuning/controller.py": ({"rcvbuf", "sndbuf"}, KERNEL_OWNS),
    "drsftp/tuning/actuation.py": ({"rcvbuf", "sndbuf"}, KERNEL_OWNS),
    "drsftp/tuning/receiver.py": ({"inflight", "cwnd"}, "PeerReport fields, read by getattr"),
    "drsftp/client/result.py": ({"streams"}, "a --json field"),
    "drsftp/server/ops/loglines.py": ({"bytes", "streams"}, "a transfer log field"),
    "drsftp/server/ops/metrics.py": ({"bytes"}, "a transfer log field"),
    "drsftp/bench/thirdparty/summary.py": ({"retrans", "streams"}, "an ss sample's field; --json's own streams"),
}


def key_strings(source: str) -> list[tuple[int, str]]:
    """(line, key) of each string that is exactly a DRS key, except the keys
    of a dict literal with some other key too: a JSON record (a timeline
    row, --json's figures) names its fields alike, but DRS pairs carry
    nothing else."""
    tree = ast.parse(source)
    records = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Dict) and not all(isinstance(k, ast.Constant) and k.value in WIRE for k in node.keys):
            records.update(id(k) for k in node.keys)
    return sorted((n.lineno, n.value) for n in ast.walk(tree)
                  if isinstance(n, ast.Constant) and n.value in WIRE and id(n) not in records)


def test_the_scan_finds_pairs_and_passes_records():
    assert key_strings('ask({"streams": n})\nx = pairs["rtt_us"]\nif "wnd" in p: pass') == [
        (1, "streams"), (2, "rtt_us"), (3, "wnd")]
    assert key_strings('row = {"t": 0.5, "bytes": 10, "rate_bps": 80}\nstreams = "a streams value"') == []


def test_every_drs_key_is_written_in_wirekeys_alone():
    found: dict[str, set[str]] = {}
    stray = []
    for path in sorted((ROOT / "drsftp").rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        if rel == "drsftp/tuning/wirekeys.py" or (rel.startswith(OWN_FIGURES) and rel not in DRS_READERS):
            continue
        for line, key in key_strings(path.read_text()):
            found.setdefault(rel, set()).add(key)
            if key not in ALLOWED.get(rel, (set(), ""))[0]:
                stray.append(f"{rel}:{line}: {key}")
    assert stray == [], "DRS keys written outside drsftp/tuning/wirekeys.py: name them from there"
    stale = {rel: keys - found.get(rel, set()) for rel, (keys, _) in ALLOWED.items() if keys - found.get(rel, set())}
    assert stale == {}, "ALLOWED names strings these modules no longer use"
