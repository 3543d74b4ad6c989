"""tests/pyftpdlib_suite's deviation list is checked strictly: a listed
upstream test that passes fails the run, and so does one that fails for
another reason than the listed one; every rule is in docs/PROTOCOL.md."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from pyftpdlib_suite.deviations import RULES

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ALLO_TEST = "tests/pyftpdlib_suite/test_functional.py::TestFtpDummyCmds::test_allo"


def _run_with_allo_reply(tmp_path, reply: str) -> subprocess.CompletedProcess[str]:
    """The listed ALLO test, with drsftp's ALLO answering ``reply``."""
    (tmp_path / "drs_allo_reply.py").write_text(
        "from drsftp.server.ftp.handler import DRSControlMixin\n\n"
        f"DRSControlMixin.ftp_ALLO = lambda self, line: self.respond({reply!r})\n")
    env = dict(os.environ, PYTHONPATH=str(tmp_path))
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "drs_allo_reply",
                           ALLO_TEST], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120, check=False)


def test_a_listed_deviation_that_passes_fails_the_run(tmp_path):
    r = _run_with_allo_reply(tmp_path, "202 No storage allocation necessary.")  # pyftpdlib's answer
    assert r.returncode == 1, r.stdout
    assert "listed as a deviation (ALLO takes a size) but passed" in r.stdout


@pytest.mark.parametrize("reply", ["502 ALLO not here.", "501 Syntax error."])
def test_a_listed_deviation_failing_otherwise_fails_the_run(tmp_path, reply):
    r = _run_with_allo_reply(tmp_path, reply)
    assert r.returncode == 1, r.stdout
    assert reply in r.stdout and "listed as a deviation" not in r.stdout


def test_every_rule_is_in_protocol_md():
    with open(os.path.join(ROOT, "docs", "PROTOCOL.md")) as f:
        section = f.read().partition("## Deviations from stock pyftpdlib")[2]
    assert section, "docs/PROTOCOL.md has no deviations section"
    for rule in RULES:
        assert f"| {rule.rule} |" in section, rule.rule
