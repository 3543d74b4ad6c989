"""PUT: a file's body into its part file, renamed into place when whole.

The FTP side's part-file rule (server/ftp/partfile.py): the body goes to
``.NAME.part`` beside NAME and is renamed over NAME once complete, so NAME
is never a half-written file and a PUT cut short keeps what arrived.  With
``Content-Range: bytes A-B/TOTAL`` a request carries one range of the file
(RFC 9110 sec. 14.5, partial PUT): several may write one part file at once
(``drsftp put -P N``), and the ledger records the ranges it holds; it is
answered 202 until they cover TOTAL bytes, then renamed (201/204) by
the last of its writers to end (an earlier one's rename would leave the
others writing into the file in place), all of one login.  A
``HEAD`` with ``DRS-Part: ranges`` reads the ledger (http/drsheader.py).
A whole-file PUT writes alone: a second writer of the same part file, by
HTTP or FTP, gets 409.  The ledger lives in memory: after a restart a
part file's ranges are unknown and a resuming client sends them again; so
they are once another upload (an FTP STOR, a COPY pull) wrote the file.
What a whole-file PUT cut short wrote is continued by partial PUTs of the
size it announced (a resume after ``HEAD``).
No PUT writes a part file by its name (403: partfile.PartNames), and
one is renamed only while its name leads to the file its writers opened
(else 409: a local process replaced it).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import shutil
from dataclasses import dataclass, field

from aiohttp import web

from ...ftp.eblock import RangeSet
from ...io import fileio
from ..ftp import partfile
from .drs import Exchange
from .paths import Target
from .problem import Problem

CONTENT_RANGE = re.compile(r"bytes (\d{1,19})-(\d{1,19})/(\d{1,19})")
MAX_HELD = 4096  # disjoint ranges one part file may hold (a client's many small PUTs stop there)
MAX_PARTS = 4096  # part files the ledger remembers (the oldest idle ones are forgotten)
BUSY = "another upload is writing this file; try again when it ends."
REPLACED = partfile.REPLACED[4:]  # (the FTP side's sentence, without its reply code)


@dataclass
class Part:
    total: int | None = None  # the file's size, as partial PUTs announced it
    held: RangeSet = field(default_factory=RangeSet)
    writers: int = 0
    whole: bool = False  # a whole-file PUT writes it
    settled: int | None = None  # the status of the PUT that renamed it into place
    owner: str | None = None  # the login whose partial PUTs write it now
    stamp: tuple[int, int, int] | None = None  # the part file as the last PUT writing it left it (_stamp)
    length: int | None = None  # the Content-Length of the whole-file PUT that wrote it (None: chunked)
    ident: tuple[int, int] | None = None  # (device, inode) of the file its writers opened


class Ledger:
    def __init__(self) -> None:
        self._parts: dict[str, Part] = {}

    def get(self, path: str) -> Part:
        part = self._parts.pop(path, None) or Part()
        self._parts[path] = part  # (newest last)
        if len(self._parts) > MAX_PARTS:
            for old in [k for k, p in self._parts.items() if not p.writers][:len(self._parts) - MAX_PARTS]:
                del self._parts[old]
        return part

    def held(self, path: str) -> list[tuple[int, int]]:
        """The ranges the part file ``path`` holds (first, last inclusive)."""
        part = self._parts.get(path)
        if part is None or not _valid(path, part):
            return []
        return [(a, b - 1) for a, b in part.held]

    def forget(self, path: str) -> None:
        self._parts.pop(path, None)


def _stamp(path: str) -> tuple[int, int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_ino, st.st_size, st.st_mtime_ns


def _ident(path: str) -> tuple[int, int] | None:
    try:
        st = os.lstat(path)
    except OSError:
        return None
    return st.st_dev, st.st_ino


def _valid(path: str, part: Part) -> bool:
    """The ledger's ranges still lie in the part file on disk, which no
    other upload wrote since the last PUT here (an FTP STOR, a COPY pull:
    each claims it alone, partfile.py; the file's stamp tells)."""
    stamp = _stamp(path)
    if stamp is None or (not part.writers and part.stamp not in (None, stamp)):
        return False
    return not len(part.held) or list(part.held)[-1][1] <= stamp[1]


def _adopts(path: str, part: Part, total: int) -> bool:
    """The ranges held came from a whole-file PUT cut short (its total
    unknown): a partial PUT for ``total`` bytes continues them if they lie
    within it, the whole PUT announced that length (when it did) and the
    part file is as it left it (``HEAD`` with ``DRS-Part: ranges`` reported
    them, so a resuming client sends only the rest)."""
    return (part.total is None and not part.writers and bool(len(part.held)) and part.length in (None, total)
            and list(part.held)[-1][1] <= total and _valid(path, part))


def content_range(header: str) -> tuple[int, int, int]:
    m = CONTENT_RANGE.fullmatch(header.strip())
    if not m:
        raise Problem(400, "Content-Range must be bytes FIRST-LAST/TOTAL.")
    first, last, total = (int(x) for x in m.groups())
    if last < first or last >= total:
        raise Problem(400, f"Content-Range {first}-{last} does not lie within {total} bytes.")
    return first, last, total


async def put(ex: Exchange, target: Target, ledger: Ledger, max_body: int | None,
              headers: dict[str, str]) -> web.Response:
    request = ex.request
    if not target.parts:
        raise Problem(409, "the home is a collection: PUT a file inside it.")
    if partfile.is_part_name(target.parts[-1]):  # (partfile.PartNames: it would replace a running upload's)
        raise Problem(403, f"{target.parts[-1]} is the name of an upload's part file: choose another name.")
    if not os.path.isdir(target.parent.fs):
        raise Problem(409, "the parent collection does not exist (MKCOL it first).")
    if os.path.isdir(target.fs):
        raise Problem(409, "a collection has that name: a file cannot be stored over it.")
    length = request.content_length
    header = request.headers.get("Content-Range")
    rng = content_range(header) if header is not None else None
    if rng is not None and length is not None and length != rng[1] - rng[0] + 1:
        raise Problem(400, f"the body has {length} bytes, Content-Range {rng[1] - rng[0] + 1}.")
    size = rng[2] if rng else length
    if max_body is not None and size is not None and size > max_body:
        raise Problem(413, f"the file is larger than this server's limit of {max_body} bytes.")
    need = (rng[1] - rng[0] + 1) if rng else (length or 0)
    if need > shutil.disk_usage(target.parent.fs).free:
        raise Problem(507, f"the disk has no room for {need} more bytes.")
    path = partfile.part_path(target.fs)
    part = ledger.get(path)
    if (rng is None and part.writers) or part.whole or (not part.writers and not partfile.claim(path)):
        raise Problem(409, BUSY)
    if rng is not None and part.total not in (None, rng[2]) and part.writers:
        raise Problem(409, f"the part file is being assembled for {part.total} bytes, not {rng[2]}.")
    who = ex.who.user if ex.who is not None else None
    if part.writers and part.owner != who:  # (another login's bytes would splice into it)
        raise Problem(409, BUSY)
    if rng is not None and _adopts(path, part, rng[2]):
        part.total = rng[2]  # a cut whole-file PUT's bytes, which a resume's HEAD reported: continued
    elif rng is not None and (part.total != rng[2] or not _valid(path, part)):
        part.total, part.held = rng[2], RangeSet()
    part.writers += 1
    part.whole, part.owner = rng is None, who
    try:
        return await _receive(ex, target, path, part, ledger, rng, max_body, headers)
    finally:
        part.writers -= 1
        part.whole = False
        if not part.writers:
            if _whole_unsettled(part):  # (the writer that was to rename it failed: the file is whole all the same)
                with contextlib.suppress(Problem):
                    _rename(target, path, part, ledger)
            part.stamp = _stamp(path)
            partfile.release(path)


async def _receive(ex: Exchange, target: Target, path: str, part: Part, ledger: Ledger,
                   rng: tuple[int, int, int] | None, max_body: int | None, headers: dict[str, str]) -> web.Response:
    request = ex.request
    flags = os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
    if rng is None:
        flags |= os.O_TRUNC
        part.total, part.held, part.length = None, RangeSet(), request.content_length
    try:
        fd = os.open(path, flags, 0o644)
    except OSError as exc:
        raise Problem(409, f"the part file {os.path.basename(path)} cannot be written: {exc.strerror}.") from None
    st = os.fstat(fd)
    if part.writers == 1:  # (the first writer: the file its companions must find there too)
        part.ident = (st.st_dev, st.st_ino)
    elif part.ident != (st.st_dev, st.st_ino):
        os.close(fd)
        raise Problem(409, REPLACED)
    ex.began = True
    if request.headers.get("Expect", "").lower() == "100-continue" and request.version >= (1, 1):
        await request.writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")  # (aiohttp's low-level server leaves it to us)
    start = rng[0] if rng else 0
    end = rng[1] + 1 if rng else None  # the range's end: a longer body is refused
    at = start
    try:
        with ex.receiving():
            # each piece as it is read (what the connection buffered, up to
            # front.READ_BUFFER): a PUT cut short has all that arrived on disk
            while data := await ex.read():
                if max_body is not None and at + len(data) > max_body:
                    raise Problem(413, f"the body is larger than this server's limit of {max_body} bytes.",
                                  {"Connection": "close"})
                if end is not None and at + len(data) > end:
                    raise Problem(400, "the body is longer than its Content-Range.", {"Connection": "close"})
                at = await _write(fd, at, data, part)
        if at - start != (end - start if end is not None else request.content_length or at - start):
            raise ConnectionAbortedError("the body ended short")
    except OSError as exc:
        if exc.errno == 28:  # ENOSPC: what arrived stays in the part file
            raise Problem(507, "the disk is full: the upload stopped; its part file keeps what arrived.",
                          {"Connection": "close"}) from None
        raise
    finally:
        os.close(fd)
    ex.complete = True
    return _settle(target, path, part, ledger, rng, headers)


async def _write(fd: int, at: int, data: bytes, part: Part) -> int:
    await asyncio.get_running_loop().run_in_executor(None, fileio.pwrite_all, fd, data, at)
    n = len(data)
    part.held.add(at, at + n)
    if len(part.held) > MAX_HELD:
        raise Problem(400, f"the part file would hold more than {MAX_HELD} separate ranges.", {"Connection": "close"})
    return at + n


def _settle(target: Target, path: str, part: Part, ledger: Ledger, rng: tuple[int, int, int] | None,
            headers: dict[str, str]) -> web.Response:
    if rng is not None:
        total = rng[2]
        if part.held.missing(total):
            return _accepted(part, headers, "the file is not whole yet")
        if part.settled is not None:
            # partial PUTs that ended together: one renamed the file whole,
            # this one's bytes are in it; the same answer again
            return web.Response(status=part.settled, headers=headers)
        if part.writers > 1:  # others still write into it: the last of them renames it
            return _accepted(part, headers, "the file is whole once the other parts being written end")
    existed = _rename(target, path, part, ledger)
    if existed:
        return web.Response(status=204, headers=headers)
    return web.Response(status=201, text="stored.\n", headers=headers)


def _accepted(part: Part, headers: dict[str, str], why: str) -> web.Response:
    """202 to a partial PUT, with the ranges the part file holds."""
    headers["DRS-Part-Ranges"] = ",".join(f"{a}-{b - 1}" for a, b in part.held)
    return web.Response(status=202, text=f"the part is stored; {why}.\n", headers=headers)


def _whole_unsettled(part: Part) -> bool:
    return part.total is not None and part.settled is None and not part.held.missing(part.total)


def _rename(target: Target, path: str, part: Part, ledger: Ledger) -> bool:
    """The part file into place (cut to its total, a partial PUT's); True
    if it replaced a file."""
    if part.ident is not None and _ident(path) != part.ident:  # (its rename would move another's file into place)
        ledger.forget(path)
        raise Problem(409, REPLACED)
    if part.total is not None:
        os.truncate(path, part.total)
    existed = os.path.lexists(target.fs)
    os.replace(path, target.fs)
    ledger.forget(path)
    part.settled = 204 if existed else 201
    return existed
