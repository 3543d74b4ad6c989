"""The suite's children get Ctrl-C whatever disposition the suite inherited."""
import os
import signal
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))

# a process started with SIGINT ignored (as under nohup) loads the suite's conftest, then
# starts a child as the tests do and prints what the child's SIGINT is
PROBE = f"""
import signal, subprocess, sys
sys.path.insert(0, {HERE!r})
import conftest  # noqa: F401
child = "import signal; print(signal.getsignal(signal.SIGINT) is signal.default_int_handler)"
sys.stdout.write(subprocess.run([sys.executable, "-c", child], capture_output=True, text=True).stdout)
"""


def test_children_take_ctrl_c_when_the_suite_inherited_it_ignored():
    r = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=60,
                       preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "True"
