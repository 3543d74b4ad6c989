"""Which names a server sends may become local names, sans-IO.

A listing entry is one path component.  The client joins only components
that pass ``check_name`` under its destination, so no listing can make it
write outside DEST (docs/SECURITY.md): no ``..``, no ``.``, no empty name,
no ``/`` (which would add components), no NUL, and no CR or LF (which
could not be sent back in a command: RFC 959 sec. 4.1.3 ends commands
with CRLF).  A name such as ``a..b`` or ``..x`` is an ordinary name.
"""

from __future__ import annotations

import posixpath

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
