"""The ``.NAME.part`` file an upload is written to until it is complete
(stream mode and MODE E alike; drsftp.ftp.partname.partial_name)."""

from __future__ import annotations

import os
import stat
import threading

from ...ftp.partname import final_name, partial_name

# a STOR onto a directory, refused before a part file is made (its rename could only fail)
OVER_DIRECTORY = "550 Is a directory: a file cannot be stored over it."
# a STOR whose part file another session is writing: two writers would interleave (RFC 959 4.2: 450,
# "file unavailable (e.g., file busy)"; the client may retry once the other upload ends)
BUSY = "450 The file is busy: another session is uploading it; try again when that upload ends."
# a part file that is a symlink: opened, the upload would write where it points (RFC 959 4.2: 553, name not allowed)
PART_LINK = "553 The upload's part file is a symbolic link here: refused (the upload would write where it points)."
# an upload whose part file's name leads to another file by its end: moving that one would lose this one
REPLACED = "451 The part file was removed or replaced while the upload wrote it: not moved into place."
# commands that make an entry of their argument's name, and those that take one away
MAKING = frozenset({"STOR", "APPE", "RNTO", "MKD", "XMKD"})
TAKING = frozenset({"DELE", "RNFR"})

# the part files uploads of this server are writing now (one writer each);
# the FTP ioloop and the HTTP front's thread both claim (docs/HTTP.md).  A
# part file is known by its directory's inode and its name: two paths to one
# directory (a symlink inside the home) name one file, one writer.
_writing: set[tuple[int, int, str]] = set()
_claimed: dict[str, tuple[int, int, str]] = {}  # the path a claim was made by -> its key
_lock = threading.Lock()


def _key(path: str) -> tuple[int, int, str]:
    folder, name = os.path.split(os.path.abspath(path))
    try:
        st = os.stat(folder)
    except OSError:  # (no directory: the upload fails on opening its part; keyed by its path meanwhile)
        return (-1, -1, os.path.abspath(path))
    return (st.st_dev, st.st_ino, name)


def claim(path: str) -> bool:
    """``path`` is now written by one upload: False if another one writes it."""
    key = _key(path)
    with _lock:
        if key in _writing:
            return False
        _writing.add(key)
        _claimed[os.path.abspath(path)] = key
        return True


def release(path: str) -> None:
    """The upload writing ``path`` ended (or never began)."""
    with _lock:
        key = _claimed.pop(os.path.abspath(path), None)
        if key is not None:
            _writing.discard(key)


def busy(path: str) -> bool:
    return _key(path) in _writing


def part_path(path: str) -> str:
    """``dir/.NAME.part`` for the local path ``dir/NAME``."""
    return os.path.join(os.path.dirname(path), os.path.basename(partial_name("/" + os.path.basename(path))))


def discard_if_empty(path: str) -> bool:
    """A STOR that started a fresh part file and failed before writing a
    byte leaves nothing behind (nothing to resume); True if removed."""
    try:
        st = os.lstat(path)
        if stat.S_ISREG(st.st_mode) and st.st_size == 0:
            os.remove(path)
            return True
    except OSError:
        pass
    return False


def is_part_name(name: str) -> bool:
    """``name`` (a final path component) is one an upload's part file has."""
    return final_name(name) != name


def same_file(path: str, fd: int) -> bool:
    """``path`` still names the file open as ``fd``: the upload's part file
    was not removed or replaced by another (then its rename would move
    that one into place)."""
    try:
        st, own = os.lstat(path), os.fstat(fd)
    except OSError:
        return False
    return (st.st_dev, st.st_ino) == (own.st_dev, own.st_ino)


class PartNames:
    """Mixed into the control handler (handler.DRSControlMixin): the
    ``.NAME.part`` names are the server's own (docs/SECURITY.md, "No data
    lost").  No command makes an entry of that name (553, RFC 959 "file
    name not allowed"): a STOR of ``.x.part`` would replace the part file
    a running upload of ``x`` writes, and be renamed over ``x`` as that
    upload's bytes; a stored or renamed one would be taken for ``x``'s
    partial upload by a later REST.  DELE and RNFR of a part file are
    refused while an upload writes it (450); an abandoned one may be
    removed or renamed.  Listings show part files as they are."""

    def refused_part_name(self, cmd, arg):  # (untyped: pyftpdlib's handler gives self its attributes)
        if (cmd not in MAKING and cmd not in TAKING) or not arg or not self.authenticated:
            return False
        try:
            path = self.fs.ftp2fs(arg)
        except Exception:  # (pyftpdlib's own handling answers it)
            return False
        name = os.path.basename(path)
        if not is_part_name(name):
            return False
        if cmd in MAKING:
            msg = (f"553 {name} is the name of an upload's part file ({final_name(name)} until it is"
                   " complete): choose another name.")
        elif busy(path):
            msg = "450 The file is busy: an upload is writing it; try again when that upload ends."
        else:
            return False
        self.respond(msg)
        self.log_cmd(cmd, arg, int(msg[:3]), msg[4:])
        return True
