"""The wheel: `python -m build --wheel` makes one that installs into a
clean venv (its dependencies from the package index) and runs there,
status page included (package data)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import urllib.request
import zipfile
from pathlib import Path

from conftest import PY

REPO = Path(__file__).resolve().parent.parent
PAGE = "drsftp/server/ops/statuspage.html"


# a PYTHONPATH the suite was started with would put the checkout before the venv
CLEAN = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}


def _run(*argv, **kw):
    r = subprocess.run([str(a) for a in argv], check=False, capture_output=True, text=True, timeout=240, env=CLEAN,
                       **kw)
    assert r.returncode == 0, f"{' '.join(map(str, argv))}:\n{r.stdout[-2000:]}\n{r.stderr[-2000:]}"
    return r


def test_the_wheel_installs_into_a_clean_venv_and_serves_its_status_page(tmp_path):
    # the build's inputs only, copied: no stale build/ of the checkout gets into the wheel
    src = tmp_path / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / name, src / name)
    shutil.copytree(REPO / "drsftp", src / "drsftp", ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    _run(PY, "-m", "build", "--wheel", "--outdir", tmp_path / "dist", src)
    [wheel] = (tmp_path / "dist").glob("drsftp-*.whl")
    with zipfile.ZipFile(wheel) as z:
        assert z.read(PAGE) == (REPO / PAGE).read_bytes(), f"{wheel} lacks {PAGE}"

    venv = tmp_path / "venv"
    _run(PY, "-m", "venv", venv)
    _run(venv / "bin" / "python", "-m", "pip", "install", "-q", "--disable-pip-version-check", wheel)
    drsftp = venv / "bin" / "drsftp"
    elsewhere = {"cwd": tmp_path}  # not the checkout: the installed package runs
    assert re.fullmatch(r"drsftp \d+\.\d+\.\d+\n", _run(drsftp, "--version", **elsewhere).stdout)
    help_text = _run(drsftp, "serve", "--help", **elsewhere).stdout
    assert "--metrics ADDR:PORT" in help_text and "--metrics-token-file" in help_text
    where = _run(venv / "bin" / "python", "-c", "import drsftp; print(drsftp.__file__)", **elsewhere).stdout
    assert where.startswith(str(venv)), where

    root = tmp_path / "root"
    root.mkdir()
    proc = subprocess.Popen([drsftp, "serve", "--root", root, "--port", "0", "--user", "u", "--password", "u-password",
                             "--metrics", "127.0.0.1:0"], cwd=tmp_path, env=CLEAN, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True)
    try:
        assert "listening on" in proc.stdout.readline()
        base = re.search(r"status page on (http://\S+)", proc.stdout.readline()).group(1)
        with urllib.request.urlopen(base, timeout=10) as r:
            assert r.read() == (REPO / PAGE).read_bytes()
    finally:
        proc.terminate()
        proc.wait(10)
        proc.stdout.close()
