"""The suite's conftest turns any skip or xfail into a failed run, and a
``root`` test fails, not skips, without root."""

import os
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def _pytest(tmp_path, body):
    shutil.copy(os.path.join(HERE, "conftest.py"), tmp_path / "conftest.py")
    (tmp_path / "test_tiny.py").write_text(body)
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-o", "addopts=",
                           "--rootdir", str(tmp_path), str(tmp_path / "test_tiny.py")],
                          check=False, cwd=tmp_path, capture_output=True, text=True, timeout=60)


def test_a_skipped_test_fails_the_run(tmp_path):
    r = _pytest(tmp_path, "import pytest\n\ndef test_ok():\n    pass\n\n"
                          "def test_skipped():\n    pytest.skip('no peer')\n")
    assert r.returncode == 1, r.stdout
    assert "1 passed, 1 skipped" in r.stdout and "skipped or xfailed" in r.stdout


def test_skip_markers_and_xfail_fail_the_run_too(tmp_path):
    r = _pytest(tmp_path, "import pytest\n\n@pytest.mark.skipif(True, reason='x')\ndef test_a():\n    pass\n\n"
                          "@pytest.mark.xfail\ndef test_b():\n    assert False\n")
    assert r.returncode == 1, r.stdout


def test_a_clean_run_passes(tmp_path):
    r = _pytest(tmp_path, "def test_ok():\n    pass\n")
    assert r.returncode == 0, r.stdout


def test_a_root_test_fails_without_root(tmp_path):
    body = ("import os, pytest\n\nos.geteuid = lambda: 1000\n\n"
            "@pytest.mark.root\ndef test_needs_root():\n    pass\n")
    r = _pytest(tmp_path, body)
    assert r.returncode == 1 and "1 error" in r.stdout and "needs root" in r.stdout, r.stdout
