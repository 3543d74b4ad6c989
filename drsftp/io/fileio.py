"""File reads and writes shared by client and server: the parallel data
paths' positioned writes, and the one digest loop (HASH, CKSM, HTTP's
Digest, the client's --verify)."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Protocol

DIGEST_CHUNK = 1 << 20  # bytes read per update


class Hasher(Protocol):
    def update(self, data: bytes, /) -> None: ...

    def hexdigest(self) -> str: ...


def pwrite_all(fd: int, data: memoryview | bytes, offset: int) -> None:
    """Write all of ``data`` at ``offset`` (os.pwrite may write less than asked)."""
    view = memoryview(data)
    while view:
        n = os.pwrite(fd, view, offset)
        view, offset = view[n:], offset + n


def pwritev_all(fd: int, bufs: list[bytes], offset: int) -> int:
    """Write all of ``bufs`` at ``offset``, in one pwritev when the kernel
    takes them all; the bytes written."""
    size = sum(len(b) for b in bufs)
    done = os.pwritev(fd, bufs, offset)
    if done < size:
        pwrite_all(fd, memoryview(b"".join(bufs))[done:], offset + done)
    return size


def feed(fd: int, update: Callable[[bytes], None], offset: int = 0, length: int | None = None) -> int:
    """Pass ``length`` bytes (None: the rest) of the open file ``fd`` from
    ``offset`` to ``update`` in order: the one digest loop.  Returns the
    offset after the last byte read.  Blocking: drivers run it in a thread."""
    left = length
    while left is None or left > 0:
        chunk = os.pread(fd, DIGEST_CHUNK if left is None else min(DIGEST_CHUNK, left), offset)
        if not chunk:
            break
        update(chunk)
        offset += len(chunk)
        if left is not None:
            left -= len(chunk)
    return offset


def digest_file(path: str, new: Callable[[], Hasher], offset: int = 0, length: int | None = None) -> tuple[int, str]:
    """(the offset after the last byte read, the hex digest) of ``length``
    bytes (None: the rest) of the file at ``path`` from ``offset``."""
    h = new()
    fd = os.open(path, os.O_RDONLY)
    try:
        return feed(fd, h.update, offset, length), h.hexdigest()
    finally:
        os.close(fd)
