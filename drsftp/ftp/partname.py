"""The names a transfer has until it is complete, at either end (docs/SECURITY.md, "No data lost")."""

from __future__ import annotations

PART = ".part"  # the suffix of a transfer not complete yet, at either end
RECORD = ".ranges"  # a download's resume record beside its part file (client/streams/rangeplan.record_path)


def partial_name(path: str) -> str:
    """Where a drsftp server keeps an upload until it is complete:
    ``dir/.NAME.part`` beside ``dir/NAME`` (same directory: the final
    rename is atomic)."""
    head, sep, tail = path.rpartition("/")
    return f"{head}{sep}.{tail}{PART}"


def download_part(path: str) -> str:
    """Where drsftp's client keeps a download until it is complete:
    ``DEST.part`` beside ``DEST`` (renamed into place at its end)."""
    return path + PART


def downloaded_name(name: str) -> str | None:
    """The download a ``NAME.part`` stands for; None for any other name."""
    return name[:-len(PART)] if name.endswith(PART) and len(name) > len(PART) else None


def part_owner(name: str) -> str | None:
    """The download whose part file (``NAME.part``) or resume record
    (``NAME.part.ranges``) a local ``name`` is; None for any other name.
    A tree that lists both gets the owner first (docs/DATASETS.md,
    "Part-file names")."""
    if name.endswith(PART + RECORD):
        name = name[:-len(RECORD)]
    return downloaded_name(name)


def final_name(path: str) -> str:
    """The name :func:`partial_name` stands for (``path`` if it is none)."""
    head, sep, tail = path.rpartition("/")
    if tail.startswith(".") and tail.endswith(PART) and len(tail) > len("." + PART):
        return f"{head}{sep}{tail[1:-len(PART)]}"
    return path
