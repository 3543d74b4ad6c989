"""Bad input at the client: one plain sentence, a non-zero exit, nothing
lost and nothing sent that the user did not ask for (README, "Errors")."""

from __future__ import annotations

import os

from conftest import drsftp, make_file


def _one_sentence(r):
    err = r.stderr.strip()
    assert r.returncode != 0 and err.count("\n") == 0 and "Traceback" not in err, r.stderr
    return err


def test_a_line_break_in_a_url_or_a_local_name_never_reaches_the_server(server, tmp_path):
    """RFC 959 sec. 4.1.3: CRLF ends a command, so a name holding one would
    smuggle in commands of its own (here a DELE)."""
    victim = os.path.join(server.root, "victim.txt")
    make_file(victim, 100)
    make_file(os.path.join(server.root, "f.bin"), 100)
    for url in (server.url("f.bin%0d%0aDELE%20victim.txt"), server.url("f.bin%0aDELE%20victim.txt"),
                server.url("f.bin").replace("@", "%0d%0aDELE%20victim.txt@", 1)):
        r = drsftp("get", url, str(tmp_path / "out"), timeout=60)
        assert "line break" in _one_sentence(r) and r.returncode == 2
    tree = tmp_path / "tree"
    tree.mkdir()
    make_file(tree / "ok.bin", 1000)
    make_file(tree / "evil\r\nDELE victim.txt", 10)
    r = drsftp("put", "-r", str(tree), server.url("up/"), timeout=60)
    # skipped before any command, and shown on one line
    assert r.returncode == 1 and "evil\\x0d\\x0aDELE victim.txt: name cannot be sent" in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 2, r.stderr  # that file, then the job's count
    assert os.path.exists(victim)
    assert os.path.getsize(os.path.join(server.root, "up", "ok.bin")) == 1000
    assert sorted(os.listdir(os.path.join(server.root, "up"))) == ["ok.bin"]


def test_the_control_connection_refuses_a_line_with_a_break_and_a_command_after_the_server_left(server):
    """The last guard, below every caller: no line with CR, LF or NUL is
    written; a command after the server closed the connection (an idle
    timeout's 421) fails at once instead of waiting out its timeout."""
    import asyncio
    import time

    from conftest import PASSWORD, USER

    from drsftp.client.control import ControlConnection, FTPError

    async def main():
        ctl = await ControlConnection.open("127.0.0.1", server.port)
        await ctl.login(USER, PASSWORD)
        for line in ("RETR a\r\nDELE victim.txt", "RETR a\nDELE victim.txt", "RETR a\0"):
            try:
                ctl.start(line)
            except FTPError as exc:
                assert "line break or NUL" in str(exc) and not exc.transient
            else:
                raise AssertionError(f"sent {line!r}")
        assert (await ctl.command("NOOP")).code == 200  # nothing half-sent before it
        assert not ctl.lost
        ctl.start("QUIT")
        for _ in range(100):  # the server answers 221 and closes; the reader ends
            if ctl.lost:
                break
            await asyncio.sleep(0.02)
        assert ctl.lost
        t0 = time.monotonic()
        try:
            await ctl.command("NOOP", timeout=30)
        except FTPError as exc:
            assert "closed by the server" in str(exc)
        else:
            raise AssertionError("a command after the server left was answered")
        assert time.monotonic() - t0 < 1
        await ctl.close()

    asyncio.run(main())
