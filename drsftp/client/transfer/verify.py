"""``--verify`` and ``--checksum``: a file's SHA-256 here against the
server's (docs/PARALLEL.md, "Resume"; docs/DATASETS.md).

The server's digest: ``HASH`` (draft-bryan-ftpext-hash) where FEAT lists
it, else GridFTP's ``CKSM SHA256 0 -1 path``, which is tried (GridFTP
lists CKSM in FEAT only after login, and FEAT goes out with the login).
A server with neither leaves the file unverified, which is an error:
nothing is presented as verified that was not.
"""

from __future__ import annotations

import asyncio
import hashlib

from ...io import fileio
from ..session.control import ControlConnection, FTPError

HASH_TIMEOUT = 3600.0  # seconds a server may take to hash a large file
NOT_OFFERED = (500, 502, 504)  # CKSM unknown, not implemented, or not for SHA256 (RFC 959 4.2)


def local_sha256(path: str) -> str:
    """The SHA-256 of the file at ``path``, as hex."""
    return fileio.digest_file(path, hashlib.sha256)[1]


async def server_sha256(ctl: ControlConnection, path: str, option: str) -> str | None:
    """The server's SHA-256 of ``path`` as hex; None when it offers
    neither HASH nor CKSM SHA256.  A reply that carries no digest is an
    FTPError naming ``option``."""
    if "HASH" in ctl.features:
        await ctl.command("OPTS HASH SHA-256")
        reply = await ctl.command(f"HASH {path}", timeout=HASH_TIMEOUT)
        words = reply.first.split(" ", 3)  # "SHA-256 0-size hex path"
        if reply.code != 213 or len(words) < 3 or words[0].upper() != "SHA-256":
            raise FTPError(f"{option}: HASH failed: {reply}", reply)
        return words[2].lower()
    reply = await ctl.command(f"CKSM SHA256 0 -1 {path}", timeout=HASH_TIMEOUT)
    if reply.code in NOT_OFFERED:
        return None
    digest = reply.first.strip().lower()
    if reply.code != 213 or len(digest) != 64 or any(c not in "0123456789abcdef" for c in digest):
        raise FTPError(f"{option}: CKSM failed: {reply}", reply)
    return digest


async def _both(ctl: ControlConnection, remote: str, local: str, option: str, unchecked: str) -> tuple[str, str]:
    """(ours, theirs); the server's first, so a server without a digest
    costs no local read."""
    theirs = await server_sha256(ctl, remote, option)
    if theirs is None:
        raise FTPError(f"{option}: the server does not offer HASH; {unchecked}", transient=False)
    return await asyncio.to_thread(local_sha256, local), theirs


async def verify(ctl: ControlConnection, remote: str, local: str) -> str:
    """``--verify``: the local file's SHA-256 equals the server's; the digest."""
    ours, theirs = await _both(ctl, remote, local, "--verify", "the file was not verified")
    if ours != theirs:
        raise FTPError(f"verification failed: SHA-256 {ours[:16]}... here, {theirs[:16]}... on the server",
                       transient=False)
    return ours


async def same_digest(ctl: ControlConnection, remote: str, local: str) -> bool:
    """``--checksum`` (with --sync): whether both copies have the same SHA-256."""
    ours, theirs = await _both(ctl, remote, local, "--checksum", "the files were not compared")
    return ours == theirs
