"""HASH (draft-bryan-ftpext-hash) on the control connection of
``drsftp serve``: a file's digest, SHA-256 unless OPTS HASH chose another
(FEAT lists them, the chosen one starred).

The digest is computed in a small thread pool (``hash_pool``, which CKSM
shares: ftp/eblock/commands.py) while the ioloop polls for it and stays free; until
its reply is out, every command but ABOR, QUIT, NOOP, STAT and DRS gets
503 (docs/DESIGN.md, "Server").
"""

from __future__ import annotations

import hashlib
from concurrent.futures import ThreadPoolExecutor

from . import compat

HASH_COMMAND = {
    "perm": "r", "auth": True, "arg": True,
    "help": "Syntax: HASH <SP> file-name (cryptographic hash of a file, draft-bryan-ftpext-hash).",
}
HASH_ALGORITHMS = {"SHA-256": "sha256", "SHA-512": "sha512", "SHA-1": "sha1", "MD5": "md5"}
ANSWERED_WHILE_HASHING = frozenset({"ABOR", "QUIT", "NOOP", "STAT", "DRS"})
hash_pool = ThreadPoolExecutor(max_workers=2, thread_name_prefix="drsftp-hash")


class HashCommands:
    """HASH, OPTS HASH and HASH's FEAT line; mixed into the control
    handler (handler.DRSControlMixin)."""

    def __init__(self, conn, server, ioloop=None):
        super().__init__(conn, server, ioloop)
        self._hash_algo = "SHA-256"
        self._hash_job = None  # the HASH or CKSM being computed

    def refused_while_hashing(self, cmd) -> bool:
        """A HASH or CKSM still computes: ``cmd`` gets 503 (True) unless it
        is answered meanwhile."""
        if self._hash_job is None or cmd in ANSWERED_WHILE_HASHING:
            return False
        self.respond("503 Bad sequence of commands: HASH is still being computed.")
        return True

    def ftp_FEAT(self, line):
        algos = ";".join(a + ("*" if a == self._hash_algo else "") for a in HASH_ALGORITHMS)
        feats = compat.extra_features(self)
        feats[:] = [f for f in feats if not f.startswith("HASH ")] + [f"HASH {algos}"]
        super().ftp_FEAT(line)

    def ftp_OPTS(self, line):
        cmd, _, arg = line.partition(" ")
        if cmd.upper() != "HASH":
            return super().ftp_OPTS(line)
        if not arg:
            self.respond(f"200 {self._hash_algo}")
        elif arg.strip().upper() in HASH_ALGORITHMS:
            self._hash_algo = arg.strip().upper()
            self.respond(f"200 {self._hash_algo}")
        else:
            self.respond("501 Unknown hash algorithm.")

    def ftp_HASH(self, path):
        if not self.fs.isfile(path):
            self.respond("550 Not a regular file.")
            return
        algo, name = self._hash_algo, self.fs.fs2ftp(path)

        def compute():
            h = hashlib.new(HASH_ALGORITHMS[algo])
            with open(path, "rb") as f:
                while chunk := f.read(1 << 20):
                    h.update(chunk)
                size = f.tell()
            return size, h.hexdigest()

        # Hash in a thread; the ioloop polls for the result and stays free.
        self._hash_job = hash_pool.submit(compute)
        self._poll_hash(algo, name)

    def _poll_hash(self, algo, name):
        job = self._hash_job
        if job is None or compat.closed(self):
            return
        if not job.done():
            self.ioloop.call_later(0.02, self._poll_hash, algo, name, _errback=self.handle_error)
            return
        self._hash_job = None
        try:
            size, digest = job.result()
        except OSError as exc:
            self.respond(f"550 Cannot hash: {exc.strerror}.")
        else:
            self.respond(f"213 {algo} 0-{max(size - 1, 0)} {digest} {name}")
        self.hash_done()

    def hash_done(self) -> None:
        """HASH's reply is out (MODE E: the commands that waited behind it go on)."""
