"""Directory listings, sans-IO: MLSD/MLST facts (RFC 3659 sec. 7) and the
Unix ``ls -l`` lines most servers send for LIST (RFC 959 leaves LIST's
format open; this is the de-facto one of vsftpd, pyftpdlib, ProFTPD).

Names come back exactly as the server sent them; whether one is safe to
use as a local name is drsftp.ftp.safepath's decision, not this module's.
"""

from __future__ import annotations

import calendar
import re
import time
from dataclasses import dataclass

FILE, DIR, LINK, OTHER = "file", "dir", "link", "other"


@dataclass(frozen=True)
class Entry:
    name: str
    type: str  # FILE, DIR, LINK or OTHER
    size: int | None = None
    mtime: float | None = None  # seconds since the epoch, UTC
    unique: str | None = None  # MLSx "unique" fact: the same object has the same value
    target: str | None = None  # LIST: where a symlink points


_TIME_VAL = re.compile(r"(\d{4})(\d\d)(\d\d)(\d\d)(\d\d)(\d\d)(\.\d+)?")  # (once: an MLSD line a file)


def parse_time_val(text: str) -> float | None:
    """``YYYYMMDDHHMMSS[.sss]`` in UTC (RFC 3659 sec. 2.3)."""
    m = _TIME_VAL.fullmatch(text.strip())
    if not m:
        return None
    y, mo, d, h, mi, s = map(int, m.groups()[:6])
    try:
        base = calendar.timegm((y, mo, d, h, mi, s))
    except (ValueError, OverflowError):
        return None
    if not (1 <= mo <= 12 and 1 <= d <= 31 and h < 24 and mi < 60 and s < 61):
        return None
    return base + (float(m.group(7)) if m.group(7) else 0.0)


def format_time_val(t: float) -> str:
    return time.strftime("%Y%m%d%H%M%S", time.gmtime(int(t)))


def parse_mlsx_line(line: str) -> Entry | None:
    """One MLSD line or MLST entry: ``fact=value;...; name`` (RFC 3659
    sec. 7.2: facts, then exactly one space, then the pathname, which may
    itself hold spaces).  None for a line without that shape."""
    line = line.rstrip("\r\n")
    facts_text, sep, name = line.partition(" ")
    if not sep or not name:
        return None
    facts: dict[str, str] = {}
    for fact in facts_text.split(";"):
        if not fact:
            continue
        key, eq, value = fact.partition("=")
        if not eq:
            return None
        facts[key.strip().lower()] = value
    kind = facts.get("type", "").lower()
    if kind in ("cdir", "pdir"):
        return None  # the directory itself and its parent (sec. 7.5.1)
    if kind == "file":
        etype = FILE
    elif kind == "dir":
        etype = DIR
    elif kind.startswith(("os.unix=slink", "os.unix=symlink")):
        etype = LINK
    else:
        etype = OTHER
    size = None
    raw = facts.get("size") or facts.get("sizd")
    if raw is not None and raw.isdigit():
        size = int(raw)
    mtime = parse_time_val(facts["modify"]) if "modify" in facts else None
    return Entry(name, etype, size, mtime, facts.get("unique"))


def parse_mlsd(data: bytes) -> list[Entry]:
    """The entries of an MLSD listing (UTF-8, RFC 3659 sec. 2.2); lines that
    do not parse are dropped."""
    out = []
    for line in data.decode("utf-8", "replace").split("\n"):
        entry = parse_mlsx_line(line)
        if entry is not None:
            out.append(entry)
    return out


def parse_mlst_reply(lines: tuple[str, ...]) -> Entry | None:
    """The entry in a 250 MLST reply: its middle line starts with a space
    (RFC 3659 sec. 7.2)."""
    for line in lines[1:-1] if len(lines) > 2 else lines:
        entry = parse_mlsx_line(line.lstrip(" "))
        if entry is not None:
            return entry
    return None


_MONTHS = {m: i for i, m in enumerate(
    ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"), 1)}
# perms links owner group size month day (HH:MM | year) name
_LS = re.compile(
    r"^([\-dlbcps])[\-rwxsStTl+.@]{9}\S*\s+\d+\s+\S+\s+\S+\s+(\d+)\s+"
    r"([A-Za-z]{3})\s+(\d{1,2})\s+(\d{1,2}:\d\d|\d{4}) (.+)$")


def parse_list_line(line: str, now: float | None = None) -> Entry | None:
    """One Unix ``ls -l`` line; None for ``total N`` and anything else."""
    m = _LS.match(line.rstrip("\r\n"))
    if not m:
        return None
    kind, size, mon, day, hm_or_year, name = m.groups()
    # The name starts after exactly one space (vsftpd, pyftpdlib): a name
    # that itself starts with spaces keeps them.
    etype = {"-": FILE, "d": DIR, "l": LINK}.get(kind, OTHER)
    target = None
    if etype == LINK and " -> " in name:
        name, target = name.split(" -> ", 1)
    return Entry(name, etype, int(size), _list_time(mon, day, hm_or_year, now), None, target)


def _list_time(mon: str, day: str, hm_or_year: str, now: float | None) -> float | None:
    month = _MONTHS.get(mon.lower())
    if month is None:
        return None
    now = time.time() if now is None else now
    if ":" in hm_or_year:  # within the last six months: the year is implied
        h, mi = (int(x) for x in hm_or_year.split(":"))
        year = time.gmtime(now).tm_year
        try:
            t = calendar.timegm((year, month, int(day), h, mi, 0))
        except (ValueError, OverflowError):
            return None
        return t if t <= now + 86400 else calendar.timegm((year - 1, month, int(day), h, mi, 0))
    try:
        return calendar.timegm((int(hm_or_year), month, int(day), 0, 0, 0))
    except (ValueError, OverflowError):
        return None


def parse_list(data: bytes, now: float | None = None) -> list[Entry]:
    out = []
    for line in data.decode("utf-8", "replace").split("\n"):
        entry = parse_list_line(line, now)
        if entry is not None and entry.name not in (".", ".."):
            out.append(entry)
    return out
