"""The DRS control-channel command: grammar, validation, reply (docs/PROTOCOL.md).

    DRS [SP key=value *(SP key=value)]        client -> server
    200 DRS key=value *(SP key=value)         server -> client

Keys are lower-case names; values unsigned decimal integers.  Every reply
to DRS begins its text with the word ``DRS`` so a client can tell it apart
from a transfer's final reply arriving at the same time.
"""

from __future__ import annotations

import re
from typing import Any

from ..tuning import PeerReport
from ..tuning.wirekeys import EXTRA_BOUNDS, FIELDS

MAX_PAIRS = 16
_PAIR = re.compile(r"^([a-z][a-z0-9_]{0,15})=(\d{1,19})$")



class DRSArgumentError(ValueError):
    """Malformed or absurd DRS arguments (reply 501)."""


def parse_args(arg: str) -> dict[str, int]:
    """Parse ``key=value`` pairs; unknown keys are kept (forward compatible)."""
    pairs: dict[str, int] = {}
    tokens = arg.split()
    if len(tokens) > MAX_PAIRS:
        raise DRSArgumentError(f"at most {MAX_PAIRS} key=value pairs")
    for tok in tokens:
        m = _PAIR.match(tok)
        if not m:
            raise DRSArgumentError(f"bad pair {tok[:40]!r}: want key=unsigned-integer")
        key, value = m.group(1), int(m.group(2))
        if key in pairs:
            raise DRSArgumentError(f"duplicate key {key!r}")
        bound = FIELDS.get(key, (None, 1, EXTRA_BOUNDS.get(key, 1 << 62)))[2]
        if value > bound:
            raise DRSArgumentError(f"{key}={value} is out of range (max {bound})")
        pairs[key] = value
    return pairs


def to_report(pairs: dict[str, int]) -> PeerReport:
    kwargs: dict[str, Any] = {}
    for key, (field, scale, _bound) in FIELDS.items():
        if key in pairs and pairs[key] > 0:
            kwargs[field] = pairs[key] * scale if scale != 1 else pairs[key]
    return PeerReport(**kwargs)


def format_pairs(values: dict[str, float | int | None]) -> str:
    """``k=v`` pairs for the values that are known, integers only."""
    return " ".join(f"{k}={int(v)}" for k, v in values.items() if v is not None and v >= 0)


def parse_reply_text(text: str) -> dict[str, int]:
    """Pairs from a DRS reply's text (``DRS k=v ...``); {} if it has none."""
    words = text.split()
    if not words or words[0] != "DRS":
        return {}
    try:
        return parse_args(" ".join(w for w in words[1:] if "=" in w))
    except DRSArgumentError:
        return {}
