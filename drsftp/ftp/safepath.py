"""Which names a server sends may become local names, sans-IO.

A listing entry is one path component.  The client joins only components
that pass ``check_name`` under its destination, so no listing can make it
write outside DEST (docs/SECURITY.md): no ``..``, no ``.``, no empty name,
no ``/`` (which would add components), no NUL, and no CR or LF (which
could not be sent back in a command: RFC 959 sec. 4.1.3 ends commands
with CRLF).  A name such as ``a..b`` or ``..x`` is an ordinary name.

The server keeps the same characters out of the other direction
(``line_break_refusal``, ``listable``): no command argument, and so no
name it creates, holds CR, LF or NUL, and a listing leaves out a name on
disk that holds one (docs/SECURITY.md, "Names").
"""

from __future__ import annotations

import posixpath
import re

MAX_NAME = 255  # bytes: NAME_MAX on Linux


class UnsafePath(ValueError):
    pass


def check_name(name: str) -> str:
    """``name`` if it is one safe path component, else UnsafePath."""
    if name in ("", ".", ".."):
        raise UnsafePath(f"unsafe name {name!r}")
    for ch in ("/", "\x00", "\r", "\n"):
        if ch in name:
            raise UnsafePath(f"unsafe name {name!r}: contains {ch!r}")
    try:
        encoded = name.encode("utf-8")  # commands are UTF-8 (RFC 2640)
    except UnicodeEncodeError as exc:
        raise UnsafePath(f"name not valid UTF-8: {name!r}") from exc
    if len(encoded) > MAX_NAME:
        raise UnsafePath(f"name longer than {MAX_NAME} bytes: {name[:40]!r}...")
    return name


# CR, LF and NUL: a listing line (RFC 3659 sec. 7.2, RFC 959 sec. 4.1.3)
# ends at CRLF, and a name holding a line break forges the lines after it.
# RFC 959 encodes a CR inside a pathname as CR NUL (Telnet end-of-line,
# RFC 854); no client needs such names and MLSx has no encoding for LF at
# all (RFC 3659 sec. 2.2), so neither form is decoded: both are refused.
LINE_BREAKS = ("\r", "\n", "\x00")
_LINE_BREAK = re.compile("[" + re.escape("".join(LINE_BREAKS)) + "]")  # (one C-level scan: it runs a command)
# Commands whose argument names something they create: RFC 959 sec. 4.2
# gives 553 "File name not allowed" for those, 501 (syntax) for the rest.
CREATING = frozenset({"STOR", "APPE", "STOU", "MKD", "XMKD", "RNTO"})


def holds_line_break(text: str) -> bool:
    return _LINE_BREAK.search(text) is not None


def line_break_refusal(cmd: str, arg: str) -> str | None:
    """The reply refusing ``cmd arg`` if the argument holds CR, LF or NUL,
    else None.  Every command's argument is checked, not only paths: one
    rule leaves no path-taking command out (SITE CHMOD, HASH, CKSM, ESTO,
    ERET, ... name their path after other words)."""
    if not arg or not holds_line_break(arg):
        return None
    what = "NUL byte" if "\x00" in arg else "line break (CR or LF)"
    if cmd.upper() in CREATING:
        return f"553 File name not allowed: it holds a {what}."
    return f"501 Syntax error in parameters or arguments: a {what} in the argument."


def listable(name: str) -> bool:
    """A name on disk a listing (MLSD, LIST, NLST, STAT) may send: one
    without CR, LF or NUL.  Such a name (made on the server's disk by its
    operator: no command can) is left out, not escaped: RFC 959 and 3659
    have no escape for LF, an escaped name would be one that does not exist,
    and a client could not name it in a command anyway (above)."""
    return not holds_line_break(name)


def client_path(root: str, fspath: str) -> str | None:
    """The path the client names for the server path ``fspath`` under the
    home ``root`` ("/" is the home), lexically, without following
    symlinks; None if ``fspath`` is not at or below ``root``."""
    base, norm = posixpath.normpath(root), posixpath.normpath(fspath)
    if norm == base:
        return "/"
    prefix = base.rstrip("/") + "/"
    return "/" + norm[len(prefix):] if norm.startswith(prefix) else None


def check_rel(parts: tuple[str, ...]) -> tuple[str, ...]:
    for p in parts:
        check_name(p)
    return parts


def local_path(root: str, parts: tuple[str, ...]) -> str:
    """``root/p1/p2/...`` after every part passed ``check_name``; the result
    is always below ``root`` (asserted, not assumed)."""
    check_rel(parts)
    path = posixpath.join(root, *parts) if parts else root
    if parts and not _below(path, root):
        raise UnsafePath(f"{'/'.join(parts)!r} leaves {root!r}")
    return path


def _below(path: str, root: str) -> bool:
    """``path`` lies strictly below ``root``, both normalised.  A root of
    "." (DEST given as the current directory) normalises away: "./a" is "a",
    below "." unless it is absolute or climbs out."""
    base, norm = posixpath.normpath(root), posixpath.normpath(path)
    if base == ".":
        return not (norm in (".", "..") or norm.startswith(("/", "../")))
    return norm != base and norm.startswith(base.rstrip("/") + "/")


def remote_join(base: str, parts: tuple[str, ...]) -> str:
    """A server path below ``base`` (which may be relative to the login
    directory); the parts have passed ``check_name``."""
    check_rel(parts)
    base = base.rstrip("/") or "/"
    return posixpath.join(base, *parts) if parts else base
