"""What a dataset job does, sans-IO: from the source tree and what the
destination already holds, the directories to make, the files to move,
the files to skip and (with --delete only) what to delete.

Trees are maps from relative paths (tuples of checked components) to
``Stat``; directories map to ``Stat(is_dir=True)``.  The same planner
serves get (source: the server's listings, destination: the local disk)
and put (the other way round).  An entry the walk could not read whole (a
directory whose listing failed, an unreadable local file) is
``unlisted``: it is not moved, and nothing at or below it on either side
is deleted (docs/DATASETS.md, "Failures and bad input").
"""

from __future__ import annotations

from dataclasses import dataclass, field

Rel = tuple[str, ...]
MTIME_SLACK = 1.0  # seconds: MLSD gives whole seconds, LIST whole minutes (then 60)


@dataclass(frozen=True, slots=True)
class Stat:
    size: int | None = None
    mtime: float | None = None
    is_dir: bool = False
    unlisted: bool = False  # not read whole: never a reason to delete (module docstring)


@dataclass(frozen=True, slots=True)
class Transfer:
    rel: Rel
    size: int | None
    mtime: float | None
    resume_from: int = 0  # bytes the destination already holds of it (--sync)


@dataclass
class Plan:
    mkdirs: list[Rel] = field(default_factory=list)  # parents before children
    transfers: list[Transfer] = field(default_factory=list)
    checks: list[Transfer] = field(default_factory=list)  # --checksum: same size, compare digests
    skipped: list[Rel] = field(default_factory=list)  # already complete
    deletes: list[Rel] = field(default_factory=list)  # children before parents
    conflicts: list[tuple[Rel, str]] = field(default_factory=list)  # cannot be done, and why
    kept: list[Rel] = field(default_factory=list)  # --delete: unlisted, nothing deleted at or below

    @property
    def total_bytes(self) -> int:
        return sum((t.size or 0) - t.resume_from for t in self.transfers)


def complete(src: Stat, dst: Stat, *, use_mtime: bool = True, slack: float = MTIME_SLACK) -> bool:
    """A destination file counts as complete when it has the source's size
    and is not older than the source (get sets the local mtime to the
    server's; put sets the server's with MFMT where offered, and where not
    the upload is newer than its source)."""
    if dst.is_dir or src.size is None or dst.size != src.size:
        return False
    if not use_mtime or src.mtime is None or dst.mtime is None:
        return True
    return dst.mtime >= src.mtime - slack


def plan(source: dict[Rel, Stat], dest: dict[Rel, Stat], *, sync: bool = False,
         checksum: bool = False, delete: bool = False, resume: bool = False,
         partial: dict[Rel, int] | None = None) -> Plan:
    """``partial``: sizes of unfinished copies (get's NAME.part), resumed
    from when ``sync`` or ``resume`` and no larger than the source."""
    out = Plan()
    partial = partial or {}
    for rel in sorted(source, key=lambda r: (len(r), r)):
        st = source[rel]
        have = dest.get(rel)
        if st.unlisted:
            continue
        if st.is_dir:
            if have is None:
                out.mkdirs.append(rel)
            elif not have.is_dir:
                out.conflicts.append((rel, "a file is in the way of this directory"))
            continue
        if any(dest.get(rel[:i]) is not None and not dest[rel[:i]].is_dir for i in range(1, len(rel))):
            out.conflicts.append((rel, "a file is in the way of its directory"))
            continue
        if have is not None and have.is_dir:
            out.conflicts.append((rel, "a directory is in the way of this file"))
            continue
        if sync and have is not None and complete(st, have, use_mtime=not checksum):
            if checksum:
                out.checks.append(Transfer(rel, st.size, st.mtime))
            else:
                out.skipped.append(rel)
            continue
        start = 0
        if (sync or resume) and rel in partial and st.size is not None and partial[rel] <= st.size:
            start = partial[rel]
        out.transfers.append(Transfer(rel, st.size, st.mtime, start))
    if delete:
        unread = {r for tree in (source, dest) for r, st in tree.items() if st.unlisted}
        extra, kept = [], set()
        for r in dest:
            top = _unread_top(r, unread)
            if top is not None:
                if source.get(top, Stat()).unlisted:
                    kept.add(top)
            elif r not in source and not _under_conflict(r, out):
                extra.append(r)
        out.deletes = sorted(extra, key=lambda r: (-len(r), r))
        out.kept = sorted(kept)
    out.transfers.sort(key=lambda t: t.rel)
    return out


def _unread_top(rel: Rel, unread: set[Rel]) -> Rel | None:
    """The entry of ``unread`` that ``rel`` is, or is below; None if none."""
    return next((rel[:n] for n in range(len(rel) + 1) if rel[:n] in unread), None)


def _under_conflict(rel: Rel, p: Plan) -> bool:
    return any(rel[:len(c)] == c for c, _ in p.conflicts)
