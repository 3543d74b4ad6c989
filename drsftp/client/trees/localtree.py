"""What a local directory holds, for dataset jobs: the destination of a
get (with unfinished NAME.part downloads) and the source of a put."""

from __future__ import annotations

import os
import stat as statmod
from collections.abc import Iterator

from ...ftp.partname import downloaded_name
from ...ftp.safepath import UnsafePath, check_name
from ..streams.rangeplan import held_prefix
from .plan import Rel, Stat


def local_tree(root: str) -> tuple[dict[Rel, Stat], dict[Rel, int]]:
    """What a local directory holds (symlinks are not followed), and the
    sizes of unfinished downloads (NAME.part)."""
    tree: dict[Rel, Stat] = {}
    parts: dict[Rel, int] = {}
    if not os.path.isdir(root):
        return tree, parts
    for dirpath, dirnames, filenames in os.walk(root):
        rel_dir = tuple(p for p in os.path.relpath(dirpath, root).split(os.sep) if p != ".")
        for d in dirnames:
            tree[rel_dir + (d,)] = Stat(is_dir=True)
        for name in filenames:
            st = os.lstat(os.path.join(dirpath, name))
            if not statmod.S_ISREG(st.st_mode):
                continue
            if (downloaded := downloaded_name(name)) is not None:  # (a -P get's part: up to its first gap)
                parts[rel_dir + (downloaded,)] = held_prefix(os.path.join(dirpath, name), None)
            tree[rel_dir + (name,)] = Stat(st.st_size, st.st_mtime)
    return tree, parts



def _sendable(name: str) -> bool:
    try:
        check_name(name)
    except UnsafePath:
        return False
    return True


def local_source_tree(root: str, report) -> dict[Rel, Stat]:
    """A local directory to upload, whole (local_source_dirs)."""
    tree: dict[Rel, Stat] = {}
    for entries in local_source_dirs(root, report):
        tree.update(entries)
    return tree


def local_source_dirs(root: str, report) -> Iterator[dict[Rel, Stat]]:
    """A local directory to upload, a directory's entries at a time (parents
    before their children; one directory's entries held, and the names of
    those still to walk).  A symlink is followed only to a file inside
    ``root``; others are reported and left out.  A directory or file that
    cannot be read is reported and comes as unlisted (plan.Stat: --delete
    deletes nothing at or below it)."""
    real_root = os.path.realpath(root)
    unread: list[OSError] = []
    for dirpath, dirnames, filenames in os.walk(root, onerror=unread.append):
        if unread:
            yield _unread(root, unread, report)
        rel_dir = _rel(root, dirpath)
        tree: dict[Rel, Stat] = {}
        for d in list(dirnames):
            full = os.path.join(dirpath, d)
            if not _sendable(d):
                dirnames.remove(d)
                report(full, "name cannot be sent (not UTF-8, or CR/LF); skipped")
                continue
            if os.path.islink(full):
                dirnames.remove(d)
                report(full, "symlink to a directory; skipped")
                continue
            tree[rel_dir + (d,)] = Stat(is_dir=True)
        for name in filenames:
            full = os.path.join(dirpath, name)
            if not _sendable(name):
                report(full, "name cannot be sent (not UTF-8, or CR/LF); skipped")
                continue
            try:
                st = os.lstat(full)
                if statmod.S_ISLNK(st.st_mode):
                    real = os.path.realpath(full)
                    if not real.startswith(real_root + os.sep):
                        report(full, "symlink out of the source tree; skipped")
                        continue
                    st = os.stat(full)
            except OSError as exc:
                report(full, f"cannot read: {exc.strerror or exc}")
                tree[rel_dir + (name,)] = Stat(unlisted=True)
                continue
            if statmod.S_ISREG(st.st_mode):
                tree[rel_dir + (name,)] = Stat(st.st_size, st.st_mtime)
        yield tree
    if unread:
        yield _unread(root, unread, report)


def _rel(root: str, path: str) -> Rel:
    return tuple(p for p in os.path.relpath(path, root).split(os.sep) if p != ".")


def _unread(root: str, errors: list[OSError], report) -> dict[Rel, Stat]:
    """The directories os.walk could not list (its ``onerror``): reported,
    as unlisted entries; ``errors`` emptied."""
    out: dict[Rel, Stat] = {}
    for exc in errors:
        path = exc.filename if isinstance(exc.filename, str) else root
        report(path, f"cannot read: {exc.strerror or exc}")
        out[_rel(root, path)] = Stat(is_dir=True, unlisted=True)
    errors.clear()
    return out
