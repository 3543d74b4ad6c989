"""A refused log-in is reported with the server's reply to PASS, the reply
that says why (RFC 959 5.4), in one sentence: the client pipelines USER,
PASS and the session's first commands (docs/DESIGN.md "Pipelined session
setup"), and the server answers them in order (RFC 959 4.2), also when it
delays a refused PASS's reply against password guessing."""

import socket
import subprocess

import pytest
from conftest import PASSWORD, USER, drsftp

REFUSED = "530 Authentication failed."


def _replies(port: int, lines: list[str], count: int) -> list[str]:
    """``lines`` sent in one write; the first ``count`` reply lines after the greeting."""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as s:
        f = s.makefile("rb")
        assert f.readline().startswith(b"220")
        s.sendall("".join(line + "\r\n" for line in lines).encode())
        return [f.readline().decode().rstrip("\r\n") for _ in range(count)]


def test_commands_pipelined_behind_a_refused_pass_are_answered_after_it(server):
    got = _replies(server.port, [f"USER {USER}", "PASS wrong", "TYPE I", "SIZE a.bin"], 4)
    assert got[0].startswith("331")
    assert got[1] == REFUSED  # the PASS's own reply, though the server holds it back
    assert all(r.startswith("530") and r != REFUSED for r in got[2:]), got


def test_a_good_login_after_a_refused_one_still_works_in_order(server):
    got = _replies(server.port, [f"USER {USER}", "PASS wrong", f"USER {USER}", f"PASS {PASSWORD}", "TYPE I"], 5)
    assert [r[:3] for r in got] == ["331", "530", "331", "230", "200"], got


@pytest.mark.parametrize(("who", "args"), [
    ("wrong password", ("get", "{url}a.bin", "{tmp}/a.bin")),  # FEAT USER PASS TYPE SIZE
    ("unknown user", ("put", "{tmp}/up.bin", "{url}up.bin")),  # FEAT USER PASS TYPE
    ("no password", ("get", "-r", "{url}", "{tmp}/tree")),  # the job's first session: MLST and MLSD behind
])
def test_a_refused_login_quotes_the_pass_reply(server, tmp_path, who, args):
    (tmp_path / "up.bin").write_bytes(b"x" * 1000)
    (tmp_path / "srv" / "a.bin").write_bytes(b"y" * 1000)
    user, password = {"wrong password": (USER, "wrong"), "unknown user": ("nobody", "wrong"),
                      "no password": (USER, None)}[who]
    auth = f"{user}:{password}" if password is not None else user
    url = f"ftp://{auth}@127.0.0.1:{server.port}/"
    r = drsftp(*(a.format(url=url, tmp=tmp_path) for a in args), stdin=subprocess.DEVNULL)
    assert r.returncode == 1
    assert r.stderr == f"drsftp: error: login refused for {user!r}: {REFUSED}\n"


def test_commands_behind_a_second_refused_pass_wait_for_its_reply(server):
    """The commands released after the first 530 hold a second PASS,
    refused too: the NOOP behind it waits again (server/ftp/waiting.py)."""
    got = _replies(server.port, [f"USER {USER}", "PASS wrong", f"USER {USER}", "PASS wrong2", "NOOP"], 5)
    assert [r[:3] for r in got] == ["331", "530", "331", "530", "200"], got
    assert got[3] == REFUSED
