"""`drsftp serve` refuses a --user password shorter than `drsftp passwd`
accepts (docs/SECURITY.md, "Passwords"): an empty one let anyone log in
with write rights.  One sentence, exit 2, before it listens, whether the
password comes from the command line, the config file or code."""

from __future__ import annotations

import pytest
from conftest import USER, drsftp

from drsftp.server.app import ServerConfig, build_server
from drsftp.server.config import ConfigError
from drsftp.server.ops import users

MIN = 8  # `drsftp passwd`'s minimum (users.MIN_PASSWORD)
SHORT = "x" * (MIN - 1)


def _one_sentence(r):
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert "listening" not in r.stdout and "Traceback" not in r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    return lines[0]


@pytest.mark.parametrize(("password", "why"), [("", "is empty"), (SHORT, "is shorter than 8 characters")])
def test_an_empty_or_short_password_on_the_command_line_is_refused(tmp_path, password, why):
    line = _one_sentence(drsftp("serve", "--root", str(tmp_path), "--port", "0", "--user", "x", "--password",
                                password, timeout=60))
    assert line.startswith(f"drsftp: error: the --password for user 'x' {why}"), line
    assert "at least 8 characters" in line


@pytest.mark.parametrize("password", ["", SHORT])
def test_an_empty_or_short_password_in_the_config_file_is_refused(tmp_path, password):
    conf = tmp_path / "serve.toml"
    (tmp_path / "srv").mkdir()
    conf.write_text(f'root = "srv"\nport = 0\nuser = "{USER}"\npassword = "{password}"\n')
    line = _one_sentence(drsftp("serve", "--config", str(conf), timeout=60))
    assert line.startswith(f"drsftp: error: the password in {conf} for user '{USER}' "), line


def test_the_rule_is_passwds(tmp_path):
    """One minimum for `drsftp passwd` and `drsftp serve`, refused in code
    too (a ServerConfig built by an embedder)."""
    with pytest.raises(ConfigError, match="is empty"):
        build_server(ServerConfig(root=str(tmp_path), port=0, user="x", password=""))
    assert users.MIN_PASSWORD == MIN and users.password_problem("x" * MIN) is None
    r = drsftp("passwd", "--password-stdin", str(tmp_path / "u"), "bob", input=SHORT + "\n", timeout=60)
    assert r.returncode != 0 and f"at least {MIN} characters" in r.stderr, r.stderr


def test_a_users_file_line_without_a_hash_is_refused(tmp_path):
    """The users file holds hashes `drsftp passwd` wrote, never a password:
    a line whose hash is empty (no password) stops the server."""
    (tmp_path / "srv").mkdir()
    (tmp_path / "users").write_text("bob::.:elradfmwMT\n")
    line = _one_sentence(drsftp("serve", "--root", str(tmp_path / "srv"), "--port", "0", "--users",
                                str(tmp_path / "users"), timeout=60))
    assert "bad user name, hash or permissions" in line
