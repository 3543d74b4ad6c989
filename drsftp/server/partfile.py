"""The ``.NAME.part`` file an upload is written to until it is complete
(stream mode and MODE E alike; drsftp.ftp.partname.partial_name)."""

from __future__ import annotations

import os
import stat

from ..ftp.partname import partial_name

# a STOR onto a directory, refused before a part file is made (its rename could only fail)
OVER_DIRECTORY = "550 Is a directory: a file cannot be stored over it."


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
