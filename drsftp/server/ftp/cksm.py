"""GridFTP's CKSM command: ``CKSM <algorithm> <offset> <length> <path>``,
reply ``213 <hex digest>`` (globus-url-copy -verify-checksum sends
``CKSM MD5 0 -1 /path``; length -1: to the end of the file)."""

from __future__ import annotations

import hashlib
import zlib

ALGORITHMS = {"MD5": "md5", "ADLER32": None, "SHA1": "sha1", "SHA256": "sha256", "SHA512": "sha512"}
FEAT_LINE = "CKSM " + "".join(f"{a};" for a in ALGORITHMS)
CHUNK = 1 << 20


def parse(arg: str) -> tuple[str, int, int | None, str]:
    """(algorithm, offset, length or None for the rest, path); ValueError if malformed."""
    parts = arg.split(" ", 3)
    if len(parts) != 4 or not parts[3]:
        raise ValueError("CKSM wants: algorithm offset length path")
    alg = parts[0].upper().replace("-", "")
    if alg not in ALGORITHMS:
        raise ValueError(f"unknown algorithm {parts[0][:20]!r}")
    offset, length = int(parts[1]), int(parts[2])
    if offset < 0 or length < -1:
        raise ValueError("offset and length must be >= 0 (length -1: to the end)")
    return alg, offset, (None if length == -1 else length), parts[3]


def checksum(path: str, alg: str, offset: int, length: int | None) -> str:
    """Hex digest of ``length`` bytes (None: the rest) from ``offset``."""
    name = ALGORITHMS[alg]
    h = hashlib.new(name) if name else None
    adler = 1
    with open(path, "rb") as f:
        f.seek(offset)
        left = length
        while left is None or left > 0:
            chunk = f.read(CHUNK if left is None else min(CHUNK, left))
            if not chunk:
                break
            if h is not None:
                h.update(chunk)
            else:
                adler = zlib.adler32(chunk, adler)
            if left is not None:
                left -= len(chunk)
    return h.hexdigest() if h is not None else f"{adler:08x}"
