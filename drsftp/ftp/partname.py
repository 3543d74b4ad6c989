"""The name an upload has until it is complete (docs/SECURITY.md, "No data lost")."""

from __future__ import annotations


def partial_name(path: str) -> str:
    """Where a drsftp server keeps an upload until it is complete:
    ``dir/.NAME.part`` beside ``dir/NAME`` (same directory: the final
    rename is atomic)."""
    head, sep, tail = path.rpartition("/")
    return f"{head}{sep}.{tail}.part"


def final_name(path: str) -> str:
    """The name :func:`partial_name` stands for (``path`` if it is none)."""
    head, sep, tail = path.rpartition("/")
    if tail.startswith(".") and tail.endswith(".part") and len(tail) > len("..part"):
        return f"{head}{sep}{tail[1:-len('.part')]}"
    return path
