"""File digests on the control connection of ``drsftp serve``: HASH
(draft-bryan-ftpext-hash), SHA-256 unless OPTS HASH chose another (FEAT
lists them, the chosen one starred), and GridFTP's CKSM (GFD.47)
``CKSM <algorithm> <offset> <length> <path>``, reply ``213 <hex digest>``
(globus-url-copy -verify-checksum sends ``CKSM MD5 0 -1 /path``; length
-1: to the end of the file), in MODE S and MODE E alike.

The algorithms are drsftp/http/digest.py's table, which HTTP's Digest
shares.  A digest is computed by :func:`digest_file` in a small thread pool
(``hash_pool``) while the ioloop polls for it and stays free; until its
reply is out, every command but ABOR, QUIT, NOOP, STAT and DRS gets 503
(docs/DESIGN.md, "Server"), and the commands waiting in order
(ftp/waiting.py) stay waiting.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from ...http.digest import BY_CKSM, BY_FTP_HASH, Algorithm
from ...io import fileio
from ..ops.digests import SHARED, version_key
from . import compat

HASH_COMMAND = {
    "perm": "r", "auth": True, "arg": True,
    "help": "Syntax: HASH <SP> file-name (cryptographic hash of a file, draft-bryan-ftpext-hash).",
}
CKSM_COMMAND = {
    "perm": None, "auth": True, "arg": True,
    "help": "Syntax: CKSM <SP> algorithm offset length path (checksum, GridFTP).",
}
DEFAULT_HASH = "SHA-256"
CKSM_FEAT = "CKSM " + "".join(f"{name};" for name in BY_CKSM)
ANSWERED_WHILE_HASHING = frozenset({"ABOR", "QUIT", "NOOP", "STAT", "DRS"})
CHUNK = fileio.DIGEST_CHUNK
hash_pool = ThreadPoolExecutor(max_workers=2, thread_name_prefix="drsftp-hash")


def digest_file(path: str, algorithm: Algorithm, offset: int = 0, length: int | None = None) -> tuple[int, str]:
    """fileio.digest_file with one of the table's algorithms; run in
    ``hash_pool``.  A whole file's digest is kept by file version in the
    cache both fronts share (ops/digests.py)."""
    if offset or length is not None:
        return fileio.digest_file(path, algorithm.new, offset, length)
    st = os.stat(path)
    key = version_key(st, algorithm.cksm)
    cached = SHARED.get(key)
    if cached is not None:
        return st.st_size, cached
    end, hexdigest = fileio.digest_file(path, algorithm.new)
    if end == st.st_size and os.stat(path).st_mtime_ns == st.st_mtime_ns:
        SHARED.put(key, hexdigest)  # (a file written while read is not kept)
    return end, hexdigest


def parse_cksm(arg: str) -> tuple[Algorithm, int, int | None, str]:
    """CKSM's (algorithm, offset, length or None for the rest, path);
    ValueError if malformed.  ``SHA-256`` is taken for ``SHA256``."""
    parts = arg.split(" ", 3)
    if len(parts) != 4 or not parts[3]:
        raise ValueError("CKSM wants: algorithm offset length path")
    algorithm = BY_CKSM.get(parts[0].upper().replace("-", ""))
    if algorithm is None:
        raise ValueError(f"unknown algorithm {parts[0][:20]!r}")
    offset, length = int(parts[1]), int(parts[2])
    if offset < 0 or length < -1:
        raise ValueError("offset and length must be >= 0 (length -1: to the end)")
    return algorithm, offset, (None if length == -1 else length), parts[3]


class HashCommands:
    """HASH, OPTS HASH, CKSM and their FEAT lines; mixed into the control
    handler (handler.DRSControlMixin)."""

    def __init__(self, conn, server, ioloop=None):
        super().__init__(conn, server, ioloop)
        self._hash_algo = DEFAULT_HASH
        self._hash_job = None  # the HASH or CKSM being computed

    def hash_running(self) -> bool:
        return self._hash_job is not None

    def refused_while_hashing(self, cmd) -> bool:
        """A HASH or CKSM still computes: ``cmd`` gets 503 (True) unless it
        is answered meanwhile."""
        if self._hash_job is None or cmd in ANSWERED_WHILE_HASHING:
            return False
        self.respond("503 Bad sequence of commands: HASH is still being computed.")
        return True

    def ftp_FEAT(self, line):
        # the default first (draft-bryan-ftpext-hash sec. 3.2: the order is free), the chosen one starred
        names = [DEFAULT_HASH] + [n for n in BY_FTP_HASH if n != DEFAULT_HASH]
        algos = ";".join(n + ("*" if n == self._hash_algo else "") for n in names)
        feats = compat.extra_features(self)
        feats[:] = [f for f in feats if not f.startswith("HASH ")] + [f"HASH {algos}"]
        if CKSM_FEAT not in feats:
            feats.append(CKSM_FEAT)
        super().ftp_FEAT(line)

    def ftp_OPTS(self, line):
        cmd, _, arg = line.partition(" ")
        if cmd.upper() != "HASH":
            return super().ftp_OPTS(line)
        if not arg:
            self.respond(f"200 {self._hash_algo}")
        elif arg.strip().upper() in BY_FTP_HASH:
            self._hash_algo = arg.strip().upper()
            self.respond(f"200 {self._hash_algo}")
        else:
            self.respond("501 Unknown hash algorithm.")

    def ftp_HASH(self, path):
        if not self.fs.isfile(path):
            self.respond("550 Not a regular file.")
            return
        algo, name = self._hash_algo, self.fs.fs2ftp(path)

        def reply(result: tuple[int, str]) -> str:
            size, digest = result
            return f"213 {algo} 0-{max(size - 1, 0)} {digest} {name}"

        self._digest(reply, "hash", path, BY_FTP_HASH[algo])

    def ftp_CKSM(self, line):
        """CKSM checks its own path (its argument holds more than a path)."""
        try:
            algorithm, offset, length, name = parse_cksm(line)
        except ValueError as exc:
            self.respond(f"501 {exc}.")
            return
        path = self.fs.ftp2fs(name)
        if not self.fs.validpath(path) or not self.authorizer.has_perm(self.username, "r", path):
            self.respond("550 Not enough privileges.")
            return
        if not self.fs.isfile(path):
            self.respond("550 Not a regular file.")
            return
        self._digest(lambda result: f"213 {result[1]}", "checksum", path, algorithm, offset, length)

    def _digest(self, reply: Callable[[Any], str], verb: str, *args: Any) -> None:
        """:func:`digest_file` in the pool; ``reply(result)`` once done, or
        550 if the file could not be read."""
        self._hash_job = hash_pool.submit(digest_file, *args)
        self._poll_digest(reply, verb)

    def _poll_digest(self, reply: Callable[[Any], str], verb: str) -> None:
        job = self._hash_job
        if job is None or compat.closed(self):
            return
        if not job.done():
            self.ioloop.call_later(0.02, self._poll_digest, reply, verb, _errback=self.handle_error)
            return
        self._hash_job = None
        try:
            result = job.result()
        except OSError as exc:
            self.respond(f"550 Cannot {verb}: {exc.strerror}.")
        else:
            self.respond(reply(result))
        self.hash_done()

    def hash_done(self) -> None:
        """The digest's reply is out (ftp/waiting.py: the commands that
        waited behind it go on)."""
