"""Instance digests over HTTP, sans-IO (RFC 3230; SHA-256: RFC 5843).

A client asks with ``Want-Digest: adler32, sha-256;q=0.5`` and the server
answers ``Digest: adler32=0a1b2c3d`` for the whole file, whatever range
the response carries (an *instance* digest).  The encodings are the IANA
registry's: ADLER32 as 8 hex digits of the 32-bit value in network byte
order, MD5 and SHA-256 as the base64 of the digest bytes.  drsftp's FTP
side computes the same values for HASH and CKSM (sha-256, md5; adler32 for
GridFTP's CKSM), so one cached digest serves both fronts.
"""

from __future__ import annotations

import base64
import hashlib
import zlib
from dataclasses import dataclass, field
from typing import Protocol

ALGORITHMS = ("adler32", "md5", "sha-256")  # what the server offers, lower case as the registry's tokens


class _Hash(Protocol):
    def update(self, data: bytes, /) -> None: ...

    def digest(self) -> bytes: ...


def want_digest(header: str | None) -> str | None:
    """The algorithm to answer ``Want-Digest`` with: the one with the highest
    q-value (default 1) among :data:`ALGORITHMS`, the earliest listed on a
    tie; None if the client wants none of them (or q=0 for each)."""
    if not header:
        return None
    best: tuple[float, int, str] | None = None
    for pos, item in enumerate(header.split(",")):
        name, *params = [p.strip() for p in item.split(";")]
        name = name.lower()
        if name not in ALGORITHMS:
            continue
        q = 1.0
        for param in params:
            key, _, value = param.partition("=")
            if key.strip().lower() == "q":
                try:
                    q = float(value)
                except ValueError:
                    q = 0.0
        if not 0.0 < q <= 1.0:
            continue
        if best is None or q > best[0]:
            best = (q, pos, name)
    return None if best is None else best[2]


@dataclass
class Digester:
    """One algorithm's running digest of a file's bytes, in order."""

    algorithm: str
    _adler: int = 1
    _hash: _Hash | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if self.algorithm not in ALGORITHMS:
            raise ValueError(f"unknown digest algorithm {self.algorithm!r}; choose from {', '.join(ALGORITHMS)}")
        if self.algorithm != "adler32":
            self._hash = hashlib.new(self.algorithm.replace("-", ""))

    def update(self, data: bytes) -> None:
        if self._hash is None:
            self._adler = zlib.adler32(data, self._adler)
        else:
            self._hash.update(data)

    def value(self) -> str:
        """The digest as the Digest header carries it (without the name)."""
        if self._hash is None:
            return f"{self._adler & 0xFFFFFFFF:08x}"
        return base64.b64encode(self._hash.digest()).decode("ascii")


def digest_header(algorithm: str, value: str) -> str:
    """A ``Digest`` header's value: ``sha-256=BASE64`` (RFC 3230 sec. 4.3.2)."""
    return f"{algorithm}={value}"


def parse_digest(header: str) -> dict[str, str]:
    """The algorithm -> value pairs of a ``Digest`` header (names lower case;
    adler32's hex lower case, base64 values as sent)."""
    out: dict[str, str] = {}
    for item in header.split(","):
        name, sep, value = item.strip().partition("=")
        if sep and name.strip():
            name = name.strip().lower()
            out[name] = value.strip().lower() if name == "adler32" else value.strip()
    return out
