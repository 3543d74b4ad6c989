"""``--verify`` over HTTP: the server's instance digest (``Want-Digest``,
RFC 3230; drsftp/http/digest.py) against the local file's.  SHA-256 where
the server offers it, else adler32 or md5; a server that answers no
``Digest`` leaves the file unverified, which is an error (nothing is
presented as verified that was not: client/transfer/verify.py)."""

from __future__ import annotations

import asyncio
import base64
import os
from typing import Any

from ...http.digest import ALIASES, Digester, parse_digest
from ...io.fileio import feed
from .errors import HTTPError
from .pool import Pool

WANT = "sha-256, adler32;q=0.5, md5;q=0.3"  # preference order (RFC 3230 sec. 4.3.1)


def local_digest(path: str, algorithm: str) -> str:
    d = Digester(algorithm)
    fd = os.open(path, os.O_RDONLY)
    try:
        feed(fd, d.update)  # (the one digest loop: io/fileio.py)
    finally:
        os.close(fd)
    return d.value()


async def verify(pool: Pool, remote: str, local: str) -> dict[str, Any]:
    """The figures of a good comparison (``sha256`` as hex where that was the
    algorithm, ``digest`` as ``name=value``); a mismatch is an HTTPError."""
    async with pool.request("HEAD", remote, ok=(200, 204), headers={"Want-Digest": WANT}) as (resp, _):
        offered = {ALIASES.get(k, k): v for k, v in parse_digest(resp.headers.get("Digest", "")).items()}
    algorithm = next((a for a in ("sha-256", "adler32", "md5") if a in offered), None)
    if algorithm is None:
        raise HTTPError(f"--verify: {pool.loc.url(remote)} comes with no digest (Want-Digest);"
                        " the file was not verified", transient=False)
    ours, theirs = await asyncio.to_thread(local_digest, local, algorithm), offered[algorithm]
    if ours != theirs:
        raise HTTPError(f"verification failed: {algorithm} {ours[:16]}... here, {theirs[:16]}... on the server"
                        f" ({local} kept)", transient=False)
    out: dict[str, Any] = {"digest": f"{algorithm}={ours}"}
    if algorithm == "sha-256":
        out["sha256"] = base64.b64decode(ours).hex()
    return out
