"""The MLST/MLSD facts `drsftp serve` sends (RFC 3659 sec. 7).

pyftpdlib sends ``type;perm;size;modify;unique`` by default and spells the
optional ``unix.mode`` as Python's ``0o755``.  GridFTP clients (gfal2,
hence FTS3 and Rucio; globus-url-copy) take a path's type *and* its mode
from ``UNIX.mode``: without that fact gfal2's stat has mode -1, so a
directory reads as a file and ``gfal-ls`` prints the directory itself
instead of its entries.  So ``UNIX.mode`` is a default fact here, its value
the plain octal that globus-gridftp-server, ProFTPD and Pure-FTPd send
(``0755``), and the OS-specific facts are spelled as those servers spell
them.  The standard facts stay lower case: fact names are case-independent
(RFC 3659 sec. 7.1), but some clients match ``type``/``size``/``modify``
exactly as lower case (docs/PROTOCOL.md#mlst-facts).
"""

from __future__ import annotations

from collections.abc import Iterator

from pyftpdlib.filesystems import AbstractedFS

from . import compat

# RFC 3659 sec. 7.5 facts plus the mode (docs/PROTOCOL.md#mlst-facts)
DEFAULT_FACTS = ("type", "perm", "size", "modify", "unique", "unix.mode")

# pyftpdlib's names of the OS-specific facts -> the spelling GridFTP,
# ProFTPD and Pure-FTPd use on the wire
_SPELLING = {"unix.mode": "UNIX.mode", "unix.uid": "UNIX.uid", "unix.gid": "UNIX.gid"}


def respell_facts(facts: str) -> str:
    """``a=1;unix.mode=0o755;`` -> ``a=1;UNIX.mode=0755;``: the OS-specific
    names as GridFTP spells them, the mode in plain octal (leading 0, at
    least four digits)."""
    out = []
    for fact in facts.split(";"):
        name, eq, value = fact.partition("=")
        if name == "unix.mode" and eq:
            value = format(int(value, 8), "04o")
        out.append(_SPELLING.get(name, name) + eq + value)
    return ";".join(out)


def respell_line(line: bytes) -> bytes:
    """One MLSx line, ``facts SP name CRLF``: the facts respelled, the name
    untouched (no fact value holds a space, RFC 3659 sec. 7.2)."""
    facts, sep, rest = line.partition(b" ")
    return respell_facts(facts.decode("utf-8")).encode("utf-8") + sep + rest


class MlsxFilesystem(AbstractedFS):
    """pyftpdlib's filesystem with the fact spelling above."""

    def format_mlsx(self, basedir, listing, perms, facts, ignore_err=True) -> Iterator[bytes]:
        for line in super().format_mlsx(basedir, listing, perms, facts, ignore_err):
            yield respell_line(line)


class MlsxFacts:
    """Mixed into the control handler: the filesystem above and the default
    facts (a client still picks its own with OPTS MLST, RFC 3659 sec. 7.9)."""

    abstracted_fs = MlsxFilesystem

    def __init__(self, conn, server, ioloop=None):
        super().__init__(conn, server, ioloop)  # type: ignore[call-arg]
        compat.set_mlst_facts(self, DEFAULT_FACTS)
