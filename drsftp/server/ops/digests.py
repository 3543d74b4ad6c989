"""Whole-file digests by file version, shared by both fronts: a digest FTP's
HASH or CKSM computed answers HTTP's ``Want-Digest`` and the other way
round, each computed once (docs/HTTP.md, "Serving").  A version is the
file's device, inode, size and modification time: a changed file is read
afresh.  A file modified in the last RACY seconds is not kept: the kernel
stamps times at clock-tick granularity, so a same-size rewrite within one
tick would keep its key (git's "racily clean" rule).  The FTP ioloop and
the HTTP front's thread both use it (one lock)."""

from __future__ import annotations

import os
import threading
import time
from collections import OrderedDict

KEPT = 256  # file versions x algorithms held, the newest
RACY = 2.0  # seconds since the last modification before a digest is kept

Key = tuple[int, int, int, int, str]


def version_key(st: os.stat_result, algorithm: str) -> Key:
    """The cache key of the file ``st`` describes, under the digest
    table's name of ``algorithm`` (http/digest.py: its CKSM name)."""
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, algorithm)


class Digests:
    def __init__(self, kept: int = KEPT) -> None:
        self._kept = kept
        self._done: OrderedDict[Key, str] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: Key) -> str | None:
        """The hex digest held for ``key``, or None."""
        with self._lock:
            value = self._done.get(key)
            if value is not None:
                self._done.move_to_end(key)
            return value

    def put(self, key: Key, hexdigest: str) -> None:
        if time.time_ns() - key[3] < RACY * 1e9:
            return
        with self._lock:
            self._done[key] = hexdigest
            self._done.move_to_end(key)
            while len(self._done) > self._kept:
                self._done.popitem(last=False)


SHARED = Digests()  # the serve process's one cache
