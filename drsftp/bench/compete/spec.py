"""`drsftp bench compete SPEC`: which flows share the link (sans-IO).

    SPEC = TERM [+ TERM ...]      TERM = [N*]KIND[@DELAY]

KIND is one of the bench's tunings (tunings.TUNINGS), a drsftp tuning with
its argument (``drs:CAP``: a DRS flow whose window is capped at CAP bytes,
``fixed:SIZE``: static buffers of SIZE), ``drs-P-N`` or ``drs-P-auto``
(``drsftp get -P``), ``gridftp-pN`` (``globus-url-copy -p N`` from
``globus-gridftp-server``), ``iperf3`` (a long-lived iperf3 flow, kernel
autotuning) or ``iperf3:SIZE`` (its socket buffers set to SIZE, iperf3 -w).
N flows of the kind (default 1) start DELAY after the first (default 0;
10s, 500ms or seconds), e.g. ``10*stock-64k+1*drs:1MiB`` or
``drs-P-auto+2*drs-P-auto@10s``.  docs/BENCHMARKS.md, "Sharing the link".
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ...ftp.eblock import MAX_STREAMS  # drsftp get -P's own limit
from ...netem.errors import NetemError
from ...netem.spec import parse_duration
from ...tuning import check_spec
from ...tuning.base import parse_buffer
from ..common import tunings as T

MAX_FLOWS = 64  # one drsftp serve takes them all (its --max-streams-total is 256)
MAX_DELAY = 3600.0  # seconds
PARALLEL = "drs-P-"
GRIDFTP = "gridftp-p"
IPERF3 = "iperf3"
# drsftp tunings whose spec takes an argument (drsftp/tuning: drs:CAP, fixed:SIZE)
WITH_ARG = ("fixed", *T.DRSFTP_TUNINGS)
CAPPED = ("drs", "drs-closed")  # the DRS tunings whose argument is the window cap

_CAP = re.compile(r"\b(drs|drs-closed):[^+@\s]+")
_TERM = re.compile(r"^(?:(?P<count>[0-9]+)\s*\*)?\s*(?P<kind>[^@*]+?)\s*(?:@\s*(?P<delay>\S+))?$")


@dataclass(frozen=True)
class Flow:
    index: int  # 0-based, in SPEC order
    kind: str  # as written, normalised: "drs:1MiB", "stock-64k", "drs-P-auto", "iperf3"
    label: str  # the kind and its number within the kind: "stock-64k#3"
    delay: float  # seconds after the first flow's start

    @property
    def name(self) -> str:
        return self.kind.partition(":")[0]

    @property
    def arg(self) -> str | None:
        _, sep, arg = self.kind.partition(":")
        return arg if sep else None

    @property
    def family(self) -> str:
        """"iperf3", "parallel" (drsftp get -P), "gridftp" (globus-url-copy -p N)
        or "tuning" (one of the bench's columns)."""
        if self.name == IPERF3:
            return "iperf3"
        if self.kind.startswith(GRIDFTP):
            return "gridftp"
        return "parallel" if self.kind.startswith(PARALLEL) else "tuning"

    @property
    def streams(self) -> str | None:
        """drs-P-N's N ("auto" or a number), gridftp-pN's N, else None."""
        if self.family == "gridftp":
            return self.kind[len(GRIDFTP):]
        return self.kind[len(PARALLEL):] if self.family == "parallel" else None


def window_cap(kind: str) -> int | None:
    """The window cap of a ``drs:CAP`` (or ``drs-closed:CAP``) kind in bytes, else None."""
    name, sep, arg = kind.partition(":")
    return parse_buffer(arg) if sep and name in CAPPED else None


def iperf3_window(kind: str) -> int | None:
    """The buffer of an ``iperf3:SIZE`` kind in bytes (iperf3 -w), None for
    plain ``iperf3`` (autotuning); ValueError in one sentence for a bad SIZE."""
    _, sep, arg = kind.partition(":")
    if not sep:
        return None
    try:
        return parse_buffer(arg)
    except ValueError:
        raise ValueError(f"iperf3:SIZE takes a buffer size up to 1 GiB (iperf3:4MiB), not {arg!r}") from None


def cap_template(spec: str) -> str:
    """The spec with each DRS window cap written CAP (a sweep's cells share it):
    10*stock-64k+1*drs:1MiB -> 10*stock-64k+1*drs:CAP."""
    return _CAP.sub(r"\1:CAP", spec)


def check_kind(kind: str) -> str:
    """The kind, or ValueError in one sentence."""
    name, sep, arg = kind.partition(":")
    if name == IPERF3:
        iperf3_window(kind)
        return kind
    if name.startswith(GRIDFTP):
        n = name[len(GRIDFTP):]
        if sep or not (n.isdigit() and 1 <= int(n) <= MAX_STREAMS):
            raise ValueError(f"gridftp-pN takes 1-{MAX_STREAMS} streams and no :ARG (gridftp-p4, gridftp-p8)")
        return kind
    if name.startswith(PARALLEL):
        n = name[len(PARALLEL):]
        if sep:
            raise ValueError(f"{name} takes no :ARG (its streams run drs)")
        if n != "auto" and not (n.isdigit() and 1 <= int(n) <= MAX_STREAMS):
            raise ValueError(f"drs-P-N takes 1-{MAX_STREAMS} streams or auto (drs-P-4, drs-P-auto)")
        return kind
    if name not in T.TUNINGS and name not in WITH_ARG:
        raise ValueError(f"unknown kind {name!r}; choose from {', '.join(kinds())}")
    if sep:
        if name not in WITH_ARG:
            hint = " (for other static sizes use fixed:SIZE)" if name in T.FIXED_SIZES else ""
            raise ValueError(f"{name} takes no :ARG{hint}")
        if not arg:
            raise ValueError("the argument after ':' is missing (e.g. drs:4MiB, fixed:64k)")
        check_spec(kind)
    elif name == "fixed":
        raise ValueError("fixed needs its size: fixed:SIZE (e.g. fixed:64k)")
    return kind


def kinds() -> list[str]:
    """Every KIND the grammar takes, as the help text lists them."""
    return [*T.TUNINGS, "fixed:SIZE", "drs:CAP", f"{PARALLEL}N", f"{PARALLEL}auto", f"{GRIDFTP}N",
            IPERF3, f"{IPERF3}:SIZE"]


def parse_compete(text: str) -> list[Flow]:
    """The flows of SPEC in order, or ValueError in one sentence."""
    terms = text.split("+")
    if not text.strip():
        raise ValueError("the spec is empty (e.g. 10*stock-64k+1*drs)")
    flows: list[Flow] = []
    seen: dict[str, int] = {}
    for term in terms:
        count, kind, delay = _term(term.strip())
        if len(flows) + count > MAX_FLOWS:
            raise ValueError(f"at most {MAX_FLOWS} flows share the link")
        for _ in range(count):
            seen[kind] = seen.get(kind, 0) + 1
            flows.append(Flow(len(flows), kind, f"{kind}#{seen[kind]}", delay))
    return flows


def _term(term: str) -> tuple[int, str, float]:
    if not term:
        raise ValueError("an empty flow between two '+'")
    m = _TERM.match(term)
    if not m:
        raise ValueError(f"{term!r} is not [N*]KIND[@DELAY] (e.g. 10*stock-64k, drs@5s)")
    count = int(m.group("count") or 1)
    if count < 1:
        raise ValueError(f"{term!r}: the count of flows must be at least 1")
    try:
        kind = check_kind(re.sub(r"\s+", "", m.group("kind")))
    except ValueError as exc:
        raise ValueError(f"{term!r}: {exc}") from None
    delay = 0.0
    if m.group("delay") is not None:
        try:
            delay = parse_duration(m.group("delay"))
        except NetemError as exc:
            raise ValueError(f"{term!r}: {exc}") from None
        if delay > MAX_DELAY:
            raise ValueError(f"{term!r}: a flow starts at most {MAX_DELAY:g} s after the first")
    return count, kind, delay
