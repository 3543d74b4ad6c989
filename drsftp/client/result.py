"""One transfer's figures: what `drsftp get/put --json` writes and what
`drsftp bench` keeps per run (drsftp.bench.common.record extends it).

The dictionary form is flat and versioned by ``schema``: a reader accepts
any record up to :data:`SCHEMA` and keeps keys it does not know in
``extra``, so records written by older versions still read."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Self

SCHEMA = 1


@dataclass(kw_only=True)
class TransferResult:
    direction: str  # "get" | "put"
    path: str  # the remote path
    bytes: int  # moved in this session (a resumed transfer counts from its offset)
    seconds: float  # first data byte to the end of the transfer
    complete: bool = True  # False: stopped at --max-time
    total_size: int | None = None
    resumed_from: int = 0
    tuning: str | None = None  # the buffer strategy, e.g. "drs(cap=67108864)"
    drs_peer: bool = False  # the peer answered DRS reports during the transfer (drs_replies > 0)
    drs_replies: int = 0  # DRS exchanges answered during the transfer
    server_last_report: dict[str, Any] = field(default_factory=dict)
    rtt_min_ms: float | None = None
    rtt_avg_ms: float | None = None
    rtt_max_ms: float | None = None
    retransmits: int | None = None
    peak_rcvbuf: int | None = None
    peak_sndbuf: int | None = None
    handshake_window: int | None = None  # buffer set before the handshake (open start, fixed)
    kernel_owns: str | None = None  # "rcvbuf" / "sndbuf": left to kernel autotuning
    sha256: str | None = None  # with --verify
    timeline: list[dict[str, Any]] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)  # figures this version has no field for

    @property
    def mbps(self) -> float:
        return self.bytes * 8 / self.seconds / 1e6 if self.seconds > 0 else 0.0

    def update(self, figures: dict[str, Any] | None = None, **kw: Any) -> None:
        """Set figures by name; names without a field go to ``extra``."""
        names = _field_names(type(self))
        for key, value in {**(figures or {}), **kw}.items():
            if key in names and key != "extra":
                setattr(self, key, value)
            elif key not in ("schema", "mbps"):
                self.extra[key] = value

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"schema": SCHEMA}
        for f in dataclasses.fields(self):
            if f.name not in ("extra", "timeline"):
                d[f.name] = getattr(self, f.name)
        d["mbps"] = round(self.mbps, 3)
        d.update(self.extra)
        d["timeline"] = self.timeline  # last: the long part
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Self:
        schema = d.get("schema", SCHEMA)
        if not isinstance(schema, int) or schema > SCHEMA:
            raise ValueError(f"result schema {schema!r} is newer than this drsftp reads ({SCHEMA})")
        required = {"direction": "", "path": "", "bytes": 0, "seconds": 0.0}
        r = cls(**{**required, **{k: v for k, v in d.items() if k in required}})
        r.update({k: v for k, v in d.items() if k not in required})
        return r

    def summary_line(self) -> str:
        """One line for the user: ``big.bin: 512.0 MiB in 13.2 s, 325 Mbit/s, RTT 100 ms, DRS with peer``."""
        name = self.path.rstrip("/").rsplit("/", 1)[-1] or self.path
        secs = f"{self.seconds:.1f}" if self.seconds >= 10 else f"{self.seconds:.2f}"
        parts = [f"{name}: {human_bytes(self.bytes)} in {secs} s", human_bits(self.mbps * 1e6)]
        if self.rtt_avg_ms is not None:
            rtt = self.rtt_avg_ms
            parts.append(f"RTT {rtt:.0f} ms" if rtt >= 10 else f"RTT {rtt:.2g} ms")
        tuning = self.tuning or ""
        if tuning.startswith("drs"):
            parts.append("DRS with peer" if self.drs_peer else "DRS at this end only")
        elif tuning:
            parts.append(f"tuning {tuning}")
        streams = self.extra.get("streams")
        if isinstance(streams, int) and streams > 1:
            parts.append(f"{streams} streams ({self.extra.get('mode', 'parallel')})")
        if self.resumed_from:
            parts.append(f"resumed at {human_bytes(self.resumed_from)}")
        if self.extra.get("note"):
            parts.append(str(self.extra["note"]))
        return ", ".join(parts)


_FIELDS: dict[type, frozenset[str]] = {}  # (update() runs per file: the names once per class)


def _field_names(cls: type) -> frozenset[str]:
    names = _FIELDS.get(cls)
    if names is None:
        names = _FIELDS[cls] = frozenset(f.name for f in dataclasses.fields(cls))
    return names


def human_bits(bps: float) -> str:
    for unit in ("bit/s", "kbit/s", "Mbit/s", "Gbit/s"):
        if bps < 1000 or unit == "Gbit/s":
            return f"{bps:.0f} {unit}" if bps >= 100 else f"{bps:.1f} {unit}"
        bps /= 1000
    return f"{bps:.1f} Gbit/s"


def human_bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GiB"
