"""Who fetches which byte range of a parallel download, sans-IO.

``RangePlan`` hands ranges to N workers: the gaps still missing are split
into one share per worker; a worker that finishes takes an unassigned gap
or, when none is left, the second half of the largest range another worker
still has ahead of it (work stealing, so a slow stream does not hold the
end of the transfer).  A worker that asks for its range in requests
(HTTP: drsftp/client/http/fetch.py) ``commit``s each one: a thief splits
what lies past that fence first, and a request in flight only when it
may ``cut`` one (the victim then stops reading at its new end, which
costs it its connection: docs/decisions/0042-cut-the-request-in-flight.md).
A worker reports its progress with ``advance``;
what it reported is held (written), so ``held`` is what a resume record
may claim (docs/PARALLEL.md).

``ResumeRecord`` is the JSON kept beside ``DEST.part``: the remote size and
version (FTP's MDTM, HTTP's validator), and the ranges the .part holds;
a get over either protocol resumes from it (``held_in``, ``record_saver``).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from ...ftp.eblock import RangeSet
from ...http.steal import even_end
from ..session.control import os_reason

log = logging.getLogger("drsftp.client")

MIN_STEAL = 1 << 20  # a range with less than 2x this ahead of it is not split
ALIGN = 1 << 16  # split points on 64 KiB boundaries


@dataclass
class Assignment:
    """Worker ``worker`` fetches [start, end); it has written [start, pos)
    and asked for [start, fence)."""

    worker: int
    start: int
    end: int
    pos: int = field(default=-1)
    fence: int = field(default=-1)

    def __post_init__(self) -> None:
        if self.pos < 0:
            self.pos = self.start
        self.fence = max(self.fence, self.start)

    @property
    def spare(self) -> int:
        """Bytes of the range not yet asked for: what a thief may split."""
        return self.end - max(self.pos, self.fence)

    @property
    def left(self) -> int:
        return self.end - self.pos

    @property
    def done(self) -> bool:
        return self.pos >= self.end


class RangePlan:
    def __init__(self, size: int, held: RangeSet | None = None, min_steal: int = MIN_STEAL) -> None:
        self.size = size
        self.held = RangeSet(list(held or ()))
        self.min_steal = min_steal
        self._free: list[tuple[int, int]] = self.held.missing(size)
        self.active: dict[int, Assignment] = {}

    @property
    def missing(self) -> int:
        return self.size - self.held.total

    @property
    def complete(self) -> bool:
        return self.held.total >= self.size and not self.active

    def split(self, workers: int) -> None:
        """Cut the free gaps so that ``workers`` can start at once: the
        largest gap is halved until there are that many (or none is worth
        cutting)."""
        for _ in range(4 * workers):
            if len(self._free) >= workers:
                break
            a, b = max(self._free, key=lambda r: r[1] - r[0], default=(0, 0))
            if b - a < 2 * self.min_steal:
                break
            mid = _align(a + (b - a) // 2)
            self._free.remove((a, b))
            self._free += [(a, mid), (mid, b)]
            self._free.sort()

    def can_take(self, cut: bool = False, least: int | None = None) -> bool:
        """Would :meth:`take` (with the same arguments) give a new worker a range now?"""
        return bool(self._free) or self._victim(-1, cut, least, None, 0.0) is not None

    def take(self, worker: int, cut: bool = False, least: int | None = None,
             speeds: Mapping[int, float] | None = None, delay: float = 0.0) -> Assignment | None:
        """The next range for ``worker`` (which has none), or None: all
        ranges are done or too small to share.  A free gap first; else half
        of the largest range past its worker's fence; else, with ``cut``,
        the unread range that ends last, split so that both end together
        (:func:`cut_point`); a steal leaves and takes at least ``least``
        (default min_steal).  ``speeds``: bytes/s each worker reads at (the
        thief's last), ``delay``: seconds before the thief's first byte."""
        if worker in self.active:
            raise ValueError(f"worker {worker} already has a range")
        if self._free:
            a, b = max(self._free, key=lambda r: r[1] - r[0])
            self._free.remove((a, b))
            asg = Assignment(worker, a, b)
        else:
            found = self._victim(worker, cut, least, speeds, delay)
            if found is None:
                return None
            victim, mid = found
            asg = Assignment(worker, mid, victim.end)
            victim.end = mid
        self.active[worker] = asg
        return asg

    def _victim(self, thief: int, cut: bool, least: int | None, speeds: Mapping[int, float] | None,
                delay: float) -> tuple[Assignment, int] | None:
        """Whose range a steal splits, and where (:meth:`take`)."""
        least = self.min_steal if least is None else least
        victim = max(self.active.values(), key=lambda s: s.spare, default=None)
        if victim is not None and victim.spare >= 2 * least:
            base = max(victim.pos, victim.fence)
            mid = _align(base + victim.spare // 2)
        elif cut and self.active:  # (a request in flight: its reader stops at ``mid``)
            rate = speeds or {}
            known = all(rate.get(s.worker) for s in self.active.values())
            victim = max(self.active.values(), key=lambda s: s.left / rate[s.worker] if known else s.left)
            if victim.left < 2 * least:
                return None
            base = victim.pos
            mid = _align(base + cut_point(victim.left, least, rate.get(victim.worker), rate.get(thief), delay))
        else:
            return None
        return (victim, mid) if base < mid < victim.end else None

    def commit(self, worker: int, upto: int) -> None:
        """``worker`` asked for its range up to ``upto`` in one request it
        will read to its end: no thief splits before it."""
        asg = self.active[worker]
        if not asg.pos <= upto <= asg.end:
            raise ValueError(f"worker {worker} asked past its range")
        asg.fence = max(asg.fence, upto)

    def advance(self, worker: int, nbytes: int) -> None:
        """``worker`` wrote ``nbytes`` more at its position."""
        asg = self.active[worker]
        if nbytes < 0 or asg.pos + nbytes > asg.end:
            raise ValueError(f"worker {worker} went past its range")
        self.held.add(asg.pos, asg.pos + nbytes)
        asg.pos += nbytes

    def release(self, worker: int) -> None:
        """``worker`` stops (its range done, or given back): what it did not
        fetch returns to the free list."""
        asg = self.active.pop(worker, None)
        if asg is not None and asg.pos < asg.end:
            self._free.append((asg.pos, asg.end))
            self._free.sort()

    def give_back(self, worker: int) -> None:
        """Stop ``worker`` early (one stream fewer): its range ends where it
        is, or where the request it committed ends."""
        asg = self.active.get(worker)
        if asg is not None and asg.spare > 0:
            cut = max(asg.pos, asg.fence)
            self._free.append((cut, asg.end))
            self._free.sort()
            asg.end = cut


def cut_point(unread: int, least: int, victim_speed: float | None, thief_speed: float | None,
              delay: float) -> int:
    """How much of ``unread`` its reader keeps when a thief splits it: as
    much as makes both end together (http/steal.py ``even_end``: the
    thief's first byte ``delay`` seconds on, speeds equal where one is
    unknown); each keeps ``least`` at least."""
    keep = even_end(unread, int(delay * thief_speed) if thief_speed else 0, victim_speed, thief_speed)
    return min(max(keep, least), unread - least)


def read_chunk(streams: int) -> int:
    """Each stream's read buffer: 4 MiB (the single stream's) up to 4
    streams, then less, at least 1 MiB (64 streams: 64 MiB in all)."""
    return max(1 << 20, min(4 << 20, (16 << 20) // max(streams, 1)))


def _align(n: int) -> int:
    return n - n % ALIGN if n % ALIGN and n - n % ALIGN > 0 else n


# -- the resume record -----------------------------------------------------------


@dataclass
class ResumeRecord:
    """What a .part file holds of which remote file (JSON beside it)."""

    size: int
    mtime: str | None
    held: RangeSet

    def to_json(self) -> str:
        return json.dumps({"size": self.size, "mtime": self.mtime,
                           "ranges": [[a, b] for a, b in self.held]})

    @classmethod
    def from_json(cls, text: str) -> ResumeRecord:
        """Raises ValueError on anything but a well-formed record."""
        d = json.loads(text)
        if not isinstance(d, dict) or not isinstance(d.get("size"), int) or d["size"] < 0:
            raise ValueError("not a resume record")
        held = RangeSet()
        for pair in d.get("ranges", []):
            if (not isinstance(pair, list) or len(pair) != 2 or not all(isinstance(x, int) for x in pair)
                    or not 0 <= pair[0] <= pair[1] <= d["size"]):
                raise ValueError("bad range in resume record")
            held.add(pair[0], pair[1])
        mtime = d.get("mtime")
        return cls(d["size"], mtime if isinstance(mtime, str) else None, held)

    def matches(self, size: int, mtime: str | None) -> bool:
        """Same remote file: same size, and same MDTM where both are known."""
        return self.size == size and (self.mtime is None or mtime is None or self.mtime == mtime)


def record_path(part: str) -> str:
    return part + ".ranges"


def load_record(part: str) -> ResumeRecord | None:
    try:
        with open(record_path(part)) as f:
            return ResumeRecord.from_json(f.read())
    except (OSError, ValueError):
        return None


def save_record(part: str, record: ResumeRecord) -> None:
    """Written to a temporary name and renamed: a crash leaves the old one,
    and a write that fails (a full disk) leaves no temporary file."""
    tmp = record_path(part) + ".tmp"
    try:
        with open(tmp, "w") as f:
            f.write(record.to_json())
        os.replace(tmp, record_path(part))
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def drop_record(part: str) -> None:
    for p in (record_path(part), record_path(part) + ".tmp"):
        try:
            os.unlink(p)
        except FileNotFoundError:
            pass


def held_in(part: str, size: int, version: str | None, what: str) -> RangeSet:
    """What an earlier get left in ``part``: its record's ranges if the
    record describes this version of the remote file (``what`` names the
    version: MDTM, validator); with no record, a single-stream get's prefix;
    a record of another version: nothing."""
    if not os.path.exists(part):
        return RangeSet()
    record = load_record(part)
    if record is None:
        return RangeSet([(0, min(os.path.getsize(part), size))])
    if not record.matches(size, version):
        log.warning("%s is from another version of the file (size or %s differs): starting over", part, what)
        return RangeSet()
    have = os.path.getsize(part)
    return RangeSet([(a, min(b, have)) for a, b in record.held if a < have])


def held_prefix(part: str, size: int | None) -> int:
    """How much of ``part`` one stream may continue at REST: up to the first
    gap its record shows (a -P get's part has holes, read as zeros), all of
    it with no record (a single stream's prefix); nothing when the record
    is of another size (another version) or unreadable.  ``size`` None (no
    SIZE known): the record's own."""
    if not os.path.exists(part):
        return 0
    if not os.path.exists(record_path(part)):
        return os.path.getsize(part)
    record = load_record(part)
    if record is None:  # (unreadable: what the part holds is unknown)
        return 0
    held = held_in(part, record.size if size is None else size, None, "MDTM")
    return next((b for a, b in held if a == 0), 0)


def open_part(part: str, fresh: bool) -> int:
    """The .part file for writes at offsets (a fresh one replaces any old
    file rather than truncating it in place, as transfer/onefile.py does)."""
    if fresh:
        drop_record(part)
        try:
            os.unlink(part)
        except FileNotFoundError:
            pass
    return os.open(part, os.O_WRONLY | os.O_CREAT, 0o644)


def record_saver(part: str, size: int, version: str | None, held: Callable[[], RangeSet]) -> Callable[[], None]:
    """``save()``: the record of what ``held()`` says the part holds now."""

    def save() -> None:
        try:
            save_record(part, ResumeRecord(size, version, held()))
        except OSError as exc:  # a resume aid: the transfer's own error, if any, is the one to tell
            log.info("cannot write the resume record of %s: %s (the last one stays)", part, os_reason(exc))

    return save
