"""The tc backend of `drsftp netem`, on a kernel that has sch_netem.

This machine's kernel has no sch_netem, so `--backend auto` takes the TUN
backend here; on most distributions it takes tc.  This boots Debian's cloud
kernel (which ships sch_netem) under qemu, software-emulated, with this
host's root shared read-only (tests/vm/tcvm.py), and runs
tests/vm/guest_tc.py there: auto picks tc, netemcheck agrees with the spec,
a three-node topology has each link's delay, DRS beats 64 KiB buffers on a
50 ms path, and down, a crash, Ctrl-C and a failed build leave nothing.  `./run setup` installs qemu and fetches the
kernel; without them this fails, never skips.
"""

from __future__ import annotations

import os
import re
import sys
import tempfile

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "vm"))
import tcvm

GUEST_TESTS = os.path.join("tests", "vm", "guest_tc.py")

pytestmark = pytest.mark.root


@pytest.mark.timeout(900)
def test_tc_backend_inside_a_kernel_with_sch_netem():
    # the console log stays beside the cached kernel when the test fails, and only then
    os.makedirs(tcvm.CACHE, exist_ok=True)
    fd, log = tempfile.mkstemp(prefix="console-", suffix=".log", dir=tcvm.CACHE)
    os.close(fd)
    argv = [sys.executable, "-m", "pytest", GUEST_TESTS, "-v", "-s", "-p", "no:cacheprovider",
            "--basetemp", "/tmp/guest-pytest"]
    try:
        status = tcvm.run(argv, log=log, timeout=720)
    except tcvm.VMError as exc:  # a VM that booted and failed is named in the message, its console kept
        if os.path.getsize(log) == 0:
            os.unlink(log)
        pytest.fail(f"the VM did not run: {exc}")
    with open(log, errors="replace") as f:
        text = f.read()
    with open(os.path.join(tcvm.REPO, GUEST_TESTS)) as f:
        expected = len(re.findall(r"^def test_", f.read(), re.MULTILINE))
    passed = re.search(r"(\d+) passed", text)
    assert status == 0 and passed and int(passed.group(1)) == expected, \
        f"the tests inside the VM failed (exit {status}); its console: {log}"
    os.unlink(log)
