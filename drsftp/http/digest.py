"""Digests of a file's bytes, sans-IO: the one table of the algorithms
drsftp computes, under each protocol's name for them, and HTTP's instance
digests (RFC 3230; SHA-256: RFC 5843).

The same values answer FTP's HASH (draft-bryan-ftpext-hash: SHA-256 by
default), GridFTP's CKSM (GFD.47, ``globus-url-copy -verify-checksum``:
MD5, ADLER32) and HTTP's ``Want-Digest`` (adler32, md5, sha-256), so
:data:`TABLE` names each algorithm once, with its constructor and the
spelling of each front (the FTP side: drsftp/server/ftp/hashing.py).

A client asks with ``Want-Digest: adler32, sha-256;q=0.5`` and the server
answers ``Digest: adler32=0a1b2c3d`` for the whole file, whatever range
the response carries (an *instance* digest).  The encodings are the IANA
registry's: ADLER32 as 8 hex digits of the 32-bit value in network byte
order, MD5 and SHA-256 as the base64 of the digest bytes; FTP's replies
carry every digest in hex.
"""

from __future__ import annotations

import base64
import hashlib
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol


class RunningDigest(Protocol):
    """What hashlib's objects offer, and :class:`Adler32` too."""

    def update(self, data: bytes, /) -> None: ...

    def digest(self) -> bytes: ...

    def hexdigest(self) -> str: ...


class Adler32:
    """zlib's Adler-32 (RFC 1950) as a running digest: 4 bytes, network
    byte order."""

    def __init__(self) -> None:
        self._value = 1

    def update(self, data: bytes, /) -> None:
        self._value = zlib.adler32(data, self._value)

    def digest(self) -> bytes:
        return (self._value & 0xFFFFFFFF).to_bytes(4, "big")

    def hexdigest(self) -> str:
        return self.digest().hex()


@dataclass(frozen=True)
class Algorithm:
    """One digest algorithm: its constructor and its name on each front
    (None: not offered there)."""

    new: Callable[[], RunningDigest]
    ftp_hash: str | None  # FTP HASH and OPTS HASH (draft-bryan-ftpext-hash)
    cksm: str  # GridFTP CKSM (GFD.47): upper case, no hyphen
    http: str | None  # RFC 3230's token (IANA "HTTP Digest Algorithm Values"), lower case


# every digest drsftp computes, in the order CKSM's FEAT line lists them
TABLE: tuple[Algorithm, ...] = (
    Algorithm(hashlib.md5, ftp_hash="MD5", cksm="MD5", http="md5"),
    Algorithm(Adler32, ftp_hash=None, cksm="ADLER32", http="adler32"),
    Algorithm(hashlib.sha1, ftp_hash="SHA-1", cksm="SHA1", http=None),
    Algorithm(hashlib.sha256, ftp_hash="SHA-256", cksm="SHA256", http="sha-256"),
    Algorithm(hashlib.sha512, ftp_hash="SHA-512", cksm="SHA512", http=None),
)
BY_FTP_HASH = {a.ftp_hash: a for a in TABLE if a.ftp_hash}
BY_CKSM = {a.cksm: a for a in TABLE}
BY_HTTP = {a.http: a for a in TABLE if a.http}
ALGORITHMS = tuple(BY_HTTP)  # what the HTTP server offers, lower case as the registry's tokens


# spellings some clients send for a registered token: gfal2 and davix ask
# ``Want-Digest: SHA256`` and read back only ``SHA256=`` (or ``sha256=``)
ALIASES = {"sha256": "sha-256"}


def want_digest(header: str | None) -> str | None:
    """The algorithm (its registered token) to answer ``Want-Digest``
    with; see :func:`wanted`."""
    found = wanted(header)
    return None if found is None else found[0]


def wanted(header: str | None) -> tuple[str, str] | None:
    """(the algorithm's registered token, the name to answer with) for
    ``Want-Digest``: the one with the highest q-value (default 1) among
    :data:`ALGORITHMS` and :data:`ALIASES`, the earliest listed on a tie;
    an alias is answered under the client's own spelling.  None if the
    client wants none of them (or q=0 for each)."""
    if not header:
        return None
    best: tuple[float, int, str, str] | None = None
    for pos, item in enumerate(header.split(",")):
        sent, *params = [p.strip() for p in item.split(";")]
        name = ALIASES.get(sent.lower(), sent.lower())
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
            best = (q, pos, name, sent if sent.lower() in ALIASES else name)
    return None if best is None else (best[2], best[3])


@dataclass
class Digester:
    """One algorithm's running digest of a file's bytes, in order; the
    algorithm by its HTTP token."""

    algorithm: str
    _hash: RunningDigest = field(init=False, repr=False)

    def __post_init__(self) -> None:
        if self.algorithm not in BY_HTTP:
            raise ValueError(f"unknown digest algorithm {self.algorithm!r}; choose from {', '.join(ALGORITHMS)}")
        self._hash = BY_HTTP[self.algorithm].new()

    def update(self, data: bytes) -> None:
        self._hash.update(data)

    def value(self) -> str:
        """The digest as the Digest header carries it (without the name)."""
        return http_value(self.algorithm, self._hash.hexdigest())


def http_value(algorithm: str, hexdigest: str) -> str:
    """A hex digest as the Digest header carries it under the HTTP token
    ``algorithm``: adler32 in hex, the others in base64 (RFC 3230 sec. 4.1.1)."""
    if algorithm == "adler32":
        return hexdigest
    return base64.b64encode(bytes.fromhex(hexdigest)).decode("ascii")


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
