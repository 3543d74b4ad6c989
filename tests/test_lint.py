"""Lint and types as pyproject.toml configures them: `ruff check` over the
tree and mypy over drsftp (strict on the sans-IO cores, drsftp/tuning and
drsftp/ftp).  Run here so the README's test command enforces them."""

from __future__ import annotations

import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", *args], cwd=ROOT, capture_output=True, text=True, timeout=300)


def test_ruff_finds_nothing() -> None:
    r = _run("ruff", "check", "--no-cache", "--output-format", "concise", ".")
    assert r.returncode == 0, f"ruff check found problems:\n{r.stdout}{r.stderr}"


def test_mypy_finds_nothing() -> None:
    r = _run("mypy")  # files and per-module strictness from pyproject.toml
    assert r.returncode == 0, f"mypy found problems:\n{r.stdout}{r.stderr}"
    assert "Success" in r.stdout
