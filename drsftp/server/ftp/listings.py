"""Directory listings (LIST, NLST, MLSD) in bounded memory.

pyftpdlib reads a whole directory with os.listdir (and NLST joins every
name into one string) before the first line goes out: a directory of
1,000,000 entries held ~100 MB of names in the server.  Here the names
come from os.scandir in batches of LISTING_BATCH, each batch sorted (a
directory within one batch is listed in order, as RFC 959 sec. 4.1.3
recommends for LIST and NLST), and the lines are produced as the data
channel drains them (Producer), so what one listing holds does not grow
with the directory.  The rules of facts.py stay: names holding CR, LF or
NUL are left out, links leading out of the home are listed as links
only.  MODE E's MLSD spools its listing (eblock/commands.py).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator

from pyftpdlib.filesystems import FilesystemError
from pyftpdlib.utils import strerror

from ...ftp.safepath import listable
from .compat import mlst_facts
from .facts import MlsxFilesystem

LISTING_BATCH = 4096  # names read (and sorted) at a time
CHUNK = 64 << 10  # bytes a producer hands the data channel at a time


def scan_names(path: str) -> Iterator[str]:
    """The listable names in the directory ``path``, in sorted batches of
    LISTING_BATCH.  The directory is opened now (its errors are the
    command's: 550), read as the names are taken."""
    entries = os.scandir(path)
    return _batches(entries)


def _batches(entries) -> Iterator[str]:
    with entries:
        batch: list[str] = []
        for entry in entries:
            if listable(entry.name):
                batch.append(entry.name)
                if len(batch) >= LISTING_BATCH:
                    batch.sort()
                    yield from batch
                    batch = []
        batch.sort()
        yield from batch


def chunks(lines: Iterable[bytes], size: int | None = None) -> Iterator[bytes]:
    """``lines`` joined into chunks of about ``size`` bytes (CHUNK)."""
    size = CHUNK if size is None else size
    rest = iter(lines)
    while buf := gather(rest, size)[0]:
        yield b"".join(buf)


def gather(items: Iterator[bytes], size: int) -> tuple[list[bytes], int]:
    """The next of ``items`` until they hold ``size`` bytes or more (or
    ``items`` ends): those items and their bytes.  A listing's chunks
    (:func:`chunks`) and MODE E's spool (eblock/send.py, spooled) take
    their bytes so, holding no more than that at a time."""
    taken: list[bytes] = []
    held = 0
    for item in items:
        taken.append(item)
        held += len(item)
        if held >= size:
            break
    return taken, held


class Producer:
    """An asynchat producer: the next chunk of a listing each time the data
    channel can take one (b"" at the end)."""

    def __init__(self, lines: Iterable[bytes]) -> None:
        self._chunks = chunks(lines)

    def more(self) -> bytes:
        return next(self._chunks, b"")


class StreamedListings:
    """Mixed into the control handler (handler.DRSControlMixin): LIST,
    NLST and MLSD of a directory in stream mode, streamed (EModeCommands
    answers them first in MODE E)."""

    def listed_names(self, path):
        # an embedder's filesystem class with a listdir of its own keeps it
        # (its whole list, as pyftpdlib reads it); drsftp's streams the names
        if type(self.fs).listdir is not MlsxFilesystem.listdir:
            return self.run_as_current_user(self.fs.listdir, path)
        return self.run_as_current_user(scan_names, path)

    def ftp_LIST(self, path):
        try:
            if self.fs.isdir(path):
                lines = self.fs.format_list(path, self.listed_names(path))
            else:
                basedir, filename = os.path.split(path)
                self.fs.lstat(path)  # its error is the reply
                lines = self.fs.format_list(basedir, [filename])
        except (OSError, FilesystemError) as err:
            self.respond(f"550 {strerror(err)}.")
            return None
        self.push_dtp_data(Producer(lines), isproducer=True, cmd="LIST")
        return path

    def ftp_NLST(self, path):
        try:
            if self.fs.isdir(path):
                names: Iterable[str] = self.listed_names(path)
            else:
                self.fs.lstat(path)
                names = [os.path.basename(path)]
        except (OSError, FilesystemError) as err:
            self.respond(f"550 {strerror(err)}.")
            return None
        enc, errors = self.encoding, self.unicode_errors
        self.push_dtp_data(Producer((n + "\r\n").encode(enc, errors) for n in names), isproducer=True, cmd="NLST")
        return path

    def ftp_MLSD(self, path):
        if not self.fs.isdir(path):  # RFC 3659 sec. 7.2.1 (a missing path: EModeCommands' 550)
            self.respond("501 No such directory.")
            return None
        try:
            names = self.listed_names(path)
        except (OSError, FilesystemError) as err:
            self.respond(f"550 {strerror(err)}.")
            return None
        lines = self.mlsd_lines(path, names)
        self.push_dtp_data(Producer(lines), isproducer=True, cmd="MLSD")
        return path

    def mlsd_lines(self, path, names):
        return self.fs.format_mlsx(path, names, self.authorizer.get_perms(self.username), mlst_facts(self))
