"""A full disk is named as such, with the path, exit 1, and leaves only
what --continue needs (docs/SECURITY.md, "No data lost": 452; RFC 959
4.2): a copy into a full destination, a get into a full local disk (stream
mode and -P 4), a put -P 4 to a full server.  The disk is a 2 MiB tmpfs
(needs root: fails, never skips, without it)."""

from __future__ import annotations

import contextlib
import os
import subprocess
import uuid

import pytest
from conftest import PY, make_file, running_server

MiB = 1 << 20


@contextlib.contextmanager
def small_disk(path):
    """A 2 MiB tmpfs at ``path``, unmounted after the block."""
    os.makedirs(path)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", f"drs-{uuid.uuid4().hex[:8]}", str(path)], check=True)
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False)


def run(*args, env):
    r = subprocess.run([PY, "-m", "drsftp", *args, "--progress", "never"], capture_output=True, text=True,
                       timeout=60, env=env)
    assert r.returncode == 1, r.stderr
    lines = [x for x in r.stderr.splitlines() if x.strip()]
    assert len(lines) == 1 and "Traceback" not in r.stderr, r.stderr
    return lines[0]


@pytest.mark.root
def test_full_disks_are_named_with_the_path_and_leave_no_temporary_files(tmp_path):
    a, full = tmp_path / "a", tmp_path / "full"
    a.mkdir()
    make_file(a / "f.bin", 6 * MiB, seed=51)
    env = dict(os.environ, XDG_STATE_HOME=str(tmp_path / "state"))
    with small_disk(full), running_server(a) as sa, running_server(full) as sf:
        for extra in ((), ("-P", "4")):
            line = run("copy", *extra, sa.url("f.bin"), sf.url("g.bin"), env=env)
            assert "no space left on the destination" in line and "/g.bin" in line, line
            assert "426" not in line
            for name in os.listdir(full):
                os.remove(full / name)
        for extra in ((), ("-P", "4")):
            dest = full / "l.bin"
            line = run("get", *extra, sa.url("f.bin"), str(dest), env=env)
            assert line == f"drsftp: error: cannot write {dest}: no space left on device", line
            left = sorted(os.listdir(full))
            assert not any(x.endswith(".tmp") for x in left) and "l.bin" not in left, left
            for name in left:
                os.remove(full / name)
        line = run("put", "-P", "4", str(a / "f.bin"), sf.url("p.bin"), env=env)
        assert line.startswith("drsftp: error: STOR /p.bin failed: 452 "), line
        assert "p.bin" not in os.listdir(full)
