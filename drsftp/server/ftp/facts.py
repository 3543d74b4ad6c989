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

The filesystem also decides what a listing shows (docs/SECURITY.md,
"Names" and "Symlinks"): a name on disk holding CR, LF or NUL is left out
(drsftp.ftp.safepath.listable), and a symlink whose target lies outside
the user's home is listed as a link and nothing more: MLSD
``type=OS.unix=symlink`` with the link's own time (RFC 3659 sec. 7.5.1
lets a server name OS-specific types; ProFTPD spells this one so), LIST an
``l`` line of size 0 without ``-> target``.  Neither the target's path nor
its size, time or type leaves the server; a link inside the home is listed
as before.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Iterable, Iterator

from pyftpdlib.filesystems import AbstractedFS

from ...ftp.listing import format_time_val
from ...ftp.safepath import client_path, holds_line_break, listable
from . import compat

# RFC 3659 sec. 7.5 facts plus the mode (docs/PROTOCOL.md#mlst-facts)
DEFAULT_FACTS = ("type", "perm", "size", "modify", "unique", "unix.mode")

# an absolute path every normalisation leaves as it is: no empty, "." or
# ".." component, no trailing "/" (ftp2fs and fs2ftp take it as it is)
_PLAIN = re.compile(r"(?:/(?!\.\.?(?:/|$))[^/]+)+")
RUN = 256  # names handed to pyftpdlib's formatter at a time

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


def _resolved_below(root: str, real_root: str, path: str) -> str | None:
    """``path`` resolved, when it is ``root`` or below it and no component
    below ``root`` is a symlink (else None): ``real_root`` joined with what
    follows ``root``."""
    if not root.startswith("/"):
        return None
    base = root.rstrip("/") or "/"
    if path in (root, base):
        return real_root
    prefix = base if base == "/" else base + "/"
    if not path.startswith(prefix):
        return None
    real = real_root
    for part in path[len(prefix):].split("/"):
        if part in ("", ".", ".."):
            return None
        real = real.rstrip("/") + "/" + part
        try:
            if stat.S_ISLNK(os.lstat(real).st_mode):
                return None
        except OSError:
            pass  # missing (a STOR's new file): taken as it is, as os.path.realpath takes it
    return real


def respell_line(line: bytes) -> bytes:
    """One MLSx line, ``facts SP name CRLF``: the facts respelled, the name
    untouched (no fact value holds a space, RFC 3659 sec. 7.2)."""
    facts, sep, rest = line.partition(b" ")
    return respell_facts(facts.decode("utf-8")).encode("utf-8") + sep + rest


class MlsxFilesystem(AbstractedFS):
    """pyftpdlib's filesystem with the fact spelling, the names and the
    symlinks above."""

    _real_root: tuple[str, str] | None = None  # (the home, resolved): validpath

    def listdir(self, path):
        return [name for name in super().listdir(path) if listable(name)]

    def validpath(self, path):
        """pyftpdlib's rule, that ``path`` with its symlinks resolved lies
        at or below the home, resolved, at a third of its cost: the home is
        resolved once per session (it is the server's configuration), and
        below it each component is one lstat while none is a link; a link
        or a path not under the home takes pyftpdlib's way
        (os.path.realpath of both) as before."""
        root = self.root
        if self._real_root is None or self._real_root[0] != root:
            self._real_root = (root, os.path.realpath(root))
        real_root = self._real_root[1]
        real = _resolved_below(root, real_root, path)
        if real is None:
            return super().validpath(path)
        return real == real_root or real.startswith(real_root.rstrip("/") + "/")

    _plain: tuple[str, bool] | None = None  # (the home, whether it is plain): _plain_root

    def _plain_root(self) -> str | None:
        """The home if it is plain (or "/"), else None."""
        root = self.root
        if self._plain is None or self._plain[0] != root:
            self._plain = (root, root == "/" or _PLAIN.fullmatch(root) is not None)
        return root if self._plain[1] else None

    def ftp2fs(self, ftppath):
        """pyftpdlib's translation; a plain absolute path (``_PLAIN``) under
        a plain home is the home joined with it, which is all pyftpdlib's
        normalisations would make of it (a command a small file)."""
        root = self._plain_root()
        if root is not None and _PLAIN.fullmatch(ftppath):
            return ftppath if root == "/" else root + ftppath
        return super().ftp2fs(ftppath)

    def fs2ftp(self, fspath):
        """pyftpdlib names every path outside the home "/", so a refused
        RETR or CWD of a link leading out said "'/' points to a path which
        is outside the user's root directory": the path asked for instead
        (the lexical one below the home, as the client named it).  That is
        also what pyftpdlib answers for a path inside, so a path lexically
        below the home is named so at once, without resolving it."""
        root = self._plain_root()
        if root is not None and _PLAIN.fullmatch(fspath):
            if root == "/":
                return fspath
            if fspath.startswith(root) and fspath[len(root):len(root) + 1] == "/":
                return fspath[len(root):]
        asked = client_path(self.root, os.path.join(self.root, fspath))
        return asked if asked is not None else super().fs2ftp(fspath)

    def leads_out(self, path: str) -> bool:
        """``path`` is a symlink whose target (followed to its end, or as
        far as it exists) is outside the home."""
        return os.path.islink(path) and not self.validpath(path)

    def readlink(self, path):
        """A link's target for LIST's ``-> target``: none for one leading
        out; an absolute one inside the home as the client names it (the
        server's own directories are not the client's business)."""
        if not self.validpath(path):
            raise OSError("target outside the home")  # format_list then shows no target
        target = super().readlink(path)
        if holds_line_break(target):  # (shown, it would end LIST's line and forge the next)
            raise OSError("target names a line break")
        if os.path.isabs(target):
            target = client_path(self.root, target) or client_path(self.realpath(self.root), self.realpath(path))
            if target is None:
                raise OSError("target not below the home by its path")
        return target

    def lstat(self, path):
        """A link leading out is listed with size 0: its own size is the
        length of the target's path."""
        st = super().lstat(path)
        if stat.S_ISLNK(st.st_mode) and not self.validpath(path):
            st = os.stat_result((st.st_mode, st.st_ino, st.st_dev, st.st_nlink, st.st_uid, st.st_gid, 0,
                                 st.st_atime, st.st_mtime, st.st_ctime))
        return st

    def format_mlsx(self, basedir, listing, perms, facts, ignore_err=True) -> Iterator[bytes]:
        run: list[str] = []  # names pyftpdlib formats (it follows links: only those staying inside)
        for name in listing:
            path = os.path.join(basedir, name)
            if not self.leads_out(path):
                run.append(name)
                if len(run) >= RUN:  # a listing holds at most RUN names (listings.py)
                    yield from self._stock_mlsx(basedir, run, perms, facts, ignore_err)
                    run = []
                continue
            yield from self._stock_mlsx(basedir, run, perms, facts, ignore_err)
            run = []
            line = self._link_line(path, name, facts)
            if line is not None:
                yield line
        yield from self._stock_mlsx(basedir, run, perms, facts, ignore_err)

    def _stock_mlsx(self, basedir, names: list[str], perms, facts, ignore_err) -> Iterable[bytes]:
        if not names:
            return
        for line in super().format_mlsx(basedir, names, perms, facts, ignore_err):
            yield respell_line(line)

    def _link_line(self, path: str, name: str, facts) -> bytes | None:
        """The MLSx line of a link leading out: its type, and its own
        time and identity (lstat), nothing of its target."""
        try:
            st = os.lstat(path)
        except OSError:
            return None
        out = []
        if "type" in facts:
            out.append("type=OS.unix=symlink;")
        if "modify" in facts:
            out.append(f"modify={format_time_val(st.st_mtime)};")
        if "unique" in facts:
            out.append(f"unique={st.st_dev:x}g{st.st_ino:x};")
        line = "".join(out) + f" {name}\r\n"
        return line.encode(self.cmd_channel.encoding, self.cmd_channel.unicode_errors)


class MlsxFacts:
    """Mixed into the control handler: the filesystem above and the default
    facts (a client still picks its own with OPTS MLST, RFC 3659 sec. 7.9)."""

    abstracted_fs = MlsxFilesystem

    def __init__(self, conn, server, ioloop=None):
        super().__init__(conn, server, ioloop)  # type: ignore[call-arg]
        compat.set_mlst_facts(self, DEFAULT_FACTS)
