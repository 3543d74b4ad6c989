"""The local record of an interrupted MODE E put (docs/PARALLEL.md, "Resume").

During a MODE E STOR the server reports the ranges it holds in
``111 Range Marker a-b,c-d`` replies (GFD.20; drsftp serve every 2 s, kept
in ``.NAME.part``).  The client keeps the union of them in a record, a
:class:`~.rangeplan.ResumeRecord` of the source file's size and mtime
(nanoseconds) and the ranges the server holds, under
``$XDG_STATE_HOME/drsftp/puts/`` (default ``~/.local/state``), named by a
digest of the server, user, remote path and the source's real path.
``--continue`` sends ``REST`` with those ranges and only the missing blocks;
the record goes when the upload completes.
"""

from __future__ import annotations

import hashlib
import logging
import os

from ...ftp.eblock import RangeSet
from ...ftp.url import FTPLocation
from ..streams.rangeplan import ResumeRecord, drop_record, load_record, save_record

log = logging.getLogger("drsftp.client")


def record_base(src: str, loc: FTPLocation) -> str:
    """Where this (source, destination) pair's record lives, without its
    ``.ranges`` suffix (:func:`.rangeplan.record_path`)."""
    state = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    key = "\0".join((loc.host, str(loc.port), loc.user, loc.path, os.path.realpath(src)))
    return os.path.join(state, "drsftp", "puts", hashlib.sha256(key.encode()).hexdigest()[:32])


def source_mtime(fd: int) -> str:
    return str(os.fstat(fd).st_mtime_ns)


def held_on_server(base: str, size: int, mtime: str) -> RangeSet | None:
    """The ranges the last interrupted put of this source left on the
    server; None without a record; empty (start over) when the source
    changed since."""
    record = load_record(base)
    if record is None:
        return None
    if not record.matches(size, mtime) or record.mtime is None:
        log.warning("the source changed since the interrupted upload: starting over")
        return RangeSet()
    return record.held


def save(base: str, size: int, mtime: str, held: RangeSet) -> None:
    try:
        os.makedirs(os.path.dirname(base), exist_ok=True)
        save_record(base, ResumeRecord(size, mtime, held))
    except OSError as exc:  # a resume aid only: the upload goes on without it
        log.warning("cannot write the upload's resume record %s: %s", base, exc.strerror or exc)


def drop(base: str) -> None:
    drop_record(base)
