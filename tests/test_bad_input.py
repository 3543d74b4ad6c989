"""Bad input at the client: one plain sentence, a non-zero exit, nothing
lost and nothing sent that the user did not ask for (README, "Errors")."""

from __future__ import annotations

import os
import subprocess

from conftest import PY, drsftp, make_file


def _one_sentence(r):
    err = r.stderr.strip()
    assert r.returncode != 0 and err.count("\n") == 0 and "Traceback" not in err, r.stderr
    return err


def _usage_error(r):
    """A usage error: one line, no usage block; exit 2."""
    assert r.returncode == 2 and "usage:" not in r.stderr
    return _one_sentence(r)


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
    assert len(r.stderr.strip().splitlines()) == 3, r.stderr  # that file, the summary line, the job's count
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

    from drsftp.client.session.control import ControlConnection, FTPError

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


def test_values_and_paths_are_checked_before_anything_moves(server, tmp_path):
    make_file(os.path.join(server.root, "f.bin"), 5000)
    url = server.url("f.bin")
    work = tmp_path / "work"
    work.mkdir()
    out = str(work / "out.bin")
    cases = [
        (("get", "--tuning", "fixed:3g", url, out), "at most 1 GiB"),  # was a TypeError traceback
        (("put", "--tuning", "drs:2g", out, url), "at most 1 GiB"),
        (("get", "--max-time", "-1", url, out), "above 0"),
        (("get", "--max-time", "nan", url, out), "above 0"),
        (("get", "--timeout", "0", url, out), "above 0"),
        (("get", "--json", str(work / "no" / "r.json"), url, out), "no such directory"),
        (("get", "--json", str(work), url, out), "is a directory"),
        (("get", "--netrc", str(work / "none"), url, out), "no such file"),
        (("get", url + "/", out), "names a directory"),
        (("get", url + "/."), "names a directory"),
        (("get", "ftp://[::1/f.bin", out), "bad URL"),
    ]
    for args, words in cases:
        r = drsftp(*args, timeout=60, cwd=work)
        assert words in _usage_error(r), (args, r.stderr)
    assert os.listdir(work) == [], os.listdir(work)  # no out.bin, no .part, no stray file


def test_a_device_or_pipe_is_never_replaced_or_read_until_it_hangs(server, tmp_path):
    make_file(os.path.join(server.root, "f.bin"), 5000)
    work = tmp_path / "work"
    work.mkdir()
    fifo = str(work / "fifo")
    os.mkfifo(fifo)
    r = drsftp("get", server.url("f.bin"), fifo, timeout=60)
    assert r.returncode == 2 and "not a regular file" in _one_sentence(r)
    r = drsftp("put", fifo, server.url("up.bin"), timeout=60)  # (reading it would wait for a writer)
    assert r.returncode == 2 and "not a regular file" in _one_sentence(r)
    assert os.path.exists(fifo) and not os.path.isfile(fifo)
    assert sorted(os.listdir(work)) == ["fifo"] and not os.path.exists(os.path.join(server.root, "up.bin"))


def test_a_continue_that_cannot_run_leaves_the_file_as_it_was(server, tmp_path):
    """--continue of DEST itself: DEST becomes DEST.part only once data
    comes, so a refused RETR or a local file larger than the remote one
    leaves DEST where it was."""
    make_file(os.path.join(server.root, "small.bin"), 10)
    work = tmp_path / "work"
    work.mkdir()
    keep = work / "keep.bin"
    for url in (server.url("missing.bin"), server.url("small.bin")):
        keep.write_bytes(b"KEEP" * 100)
        r = drsftp("get", "--continue", url, str(keep), timeout=60)
        assert r.returncode == 1, r.stderr
        _one_sentence(r)
        assert keep.read_bytes() == b"KEEP" * 100, (url, r.stderr)
        assert sorted(os.listdir(work)) == ["keep.bin"], (url, r.stderr)
    # and one that runs continues DEST itself
    make_file(os.path.join(server.root, "big.bin"), 300000, seed=4)
    with open(os.path.join(server.root, "big.bin"), "rb") as f:
        head = f.read(100000)
    keep.write_bytes(head)
    r = drsftp("get", "--continue", "--json", str(tmp_path / "r.json"), server.url("big.bin"), str(keep),
               timeout=60)
    assert r.returncode == 0, r.stderr
    with open(os.path.join(server.root, "big.bin"), "rb") as f:
        assert keep.read_bytes() == f.read()
    import json
    with open(tmp_path / "r.json") as f:
        assert json.load(f)["bytes"] == 200000  # only what was missing


def test_connection_refused_is_said_in_words(tmp_path):
    import socket

    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]  # bound, never listening: a refused connect
    try:
        r = drsftp("get", f"ftp://127.0.0.1:{port}/f", str(tmp_path / "o"), timeout=60)
    finally:
        s.close()
    assert r.returncode == 1 and _one_sentence(r).endswith(f"cannot connect to 127.0.0.1:{port}: connection refused")



def shrinking_put(monkeypatch, src, url):
    """transfer.put of ``src`` (4 MiB), which another program cuts to
    1 MiB once the transfer starts; the FTPError it ends with."""
    import asyncio

    import pytest

    from drsftp.client.session.control import FTPError
    from drsftp.client.transfer import getput as transfer
    from drsftp.client.transfer import onefile
    from drsftp.ftp.url import parse_url

    orig = onefile.send_file

    async def shrinking(sock, f, offset, count, xfer):
        os.truncate(src, 1 << 20)
        await orig(sock, f, offset, count, xfer)

    monkeypatch.setattr(onefile, "send_file", shrinking)
    with pytest.raises(FTPError) as err:
        asyncio.run(transfer.put(str(src), parse_url(url), transfer.TransferOptions(progress=False)))
    return err.value


def test_a_file_that_shrinks_while_it_is_sent_fails_the_put(server, tmp_path, monkeypatch):
    """drsftp serve checks the size ALLO announced (its 451 keeps the
    part for --continue); a server without the check: test_interop_peers."""
    src = make_file(tmp_path / "src.bin", 4 << 20, seed=5)
    exc = shrinking_put(monkeypatch, src, server.url("up.bin"))
    assert "451 Upload incomplete: 1048576 of 4194304 bytes" in str(exc)


def test_a_missing_file_is_one_sentence_with_streams_and_delete_needs_r(server, tmp_path):
    make_file(os.path.join(server.root, "a.bin"), 100)
    r = drsftp("get", "-P", "4", server.url("missing.bin"), str(tmp_path / "x"), timeout=60)
    assert r.returncode == 1
    assert _one_sentence(r).endswith("cannot retrieve /missing.bin: 550 No such file or directory.")
    r = drsftp("get", "--delete", server.url("a.bin"), str(tmp_path / "y"), timeout=60)
    assert r.returncode == 2 and "--delete goes with -r" in _one_sentence(r)
    assert os.listdir(tmp_path) == ["srv"]


def test_reasons_in_words_from_every_kind_of_os_error():
    """os_reason reads an OS errno as words, but a resolver's (negative) or
    OpenSSL's errno is no OS errno: their own text stands."""
    import socket
    import ssl

    from drsftp.client.session.control import os_reason

    assert os_reason(ConnectionRefusedError(111, "Connect call failed ('127.0.0.1', 1)")) == "connection refused"
    assert os_reason(socket.gaierror(-2, "Name or service not known")) == "name or service not known"
    assert os_reason(ssl.SSLEOFError(8, "EOF occurred in violation of protocol")).startswith("EOF occurred")
    assert os_reason(TimeoutError()) == "timed out"


def test_a_job_checks_its_json_path_before_it_moves_anything(server, tmp_path):
    os.makedirs(os.path.join(server.root, "d"))
    make_file(os.path.join(server.root, "d", "a.bin"), 100)
    out = tmp_path / "out"
    r = drsftp("get", "-r", "--json", str(tmp_path / "no" / "r.json"), server.url("d/"), str(out), timeout=60)
    assert r.returncode == 2 and "no such directory" in _one_sentence(r) and not out.exists()


def test_passwd_without_a_terminal_or_a_password_is_one_sentence_and_writes_nothing(tmp_path):
    users = tmp_path / "users"
    # a new session: no controlling terminal, as under cron or CI
    r = drsftp("passwd", str(users), "carol", stdin=subprocess.DEVNULL, start_new_session=True, timeout=60)
    assert r.returncode == 2 and _one_sentence(r) == ("drsftp: error: no terminal to ask the password on: give it"
                                                      " on stdin with --password-stdin")
    r = drsftp("passwd", str(users), "carol", "--password-stdin", input="", timeout=60)
    assert r.returncode == 2
    assert _one_sentence(r) == "drsftp: error: --password-stdin: stdin ended before a password line"
    assert not users.exists() and os.listdir(tmp_path) == []


def test_passwd_at_a_terminal_that_ends_input_is_one_sentence_and_writes_nothing(tmp_path):
    """Ctrl-D at the prompt: getpass's EOFError is one sentence."""
    users = tmp_path / "users"
    master, slave = os.openpty()
    try:  # stdin a terminal, and no controlling one: getpass asks on stdin, the prompt on stderr
        proc = subprocess.Popen([PY, "-m", "drsftp", "passwd", str(users), "carol"], stdin=slave,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
        os.close(slave)
        seen = b""
        while b"password for carol: " not in seen and (chunk := proc.stderr.read1(4096)):
            seen += chunk  # (echo is off and pending input flushed only then: wait for the prompt)
        os.write(master, b"\x04")  # VEOF at the start of a line: read() returns nothing
        out, err = proc.communicate(timeout=60)
    finally:
        os.close(master)
    err = (seen + err).decode()
    assert proc.returncode == 2 and "Traceback" not in err and out == b"", err
    assert err.splitlines() == ["password for carol: ", "drsftp: error: input ended before a password: nothing written"]
    assert not users.exists()


def test_passwd_delete_of_a_user_not_in_the_file_fails_and_leaves_the_file(tmp_path):
    users = tmp_path / "users"
    r = drsftp("passwd", str(users), "alice", "--password-stdin", input="alice-password\n", timeout=60)
    assert r.returncode == 0, r.stderr
    before, inode = users.read_bytes(), os.stat(users).st_ino
    r = drsftp("passwd", str(users), "carol", "--delete", timeout=60)
    assert r.returncode == 1 and _one_sentence(r) == f"drsftp: error: carol is not in {users}: nothing deleted"
    assert r.stdout == "" and users.read_bytes() == before
    assert os.stat(users).st_ino == inode  # not rewritten (a write replaces the file)
    missing = tmp_path / "none"
    r = drsftp("passwd", str(missing), "carol", "--delete", timeout=60)
    assert r.returncode == 1 and _one_sentence(r) == f"drsftp: error: carol is not in {missing}: nothing deleted"
    assert sorted(os.listdir(tmp_path)) == ["users"]
    r = drsftp("passwd", str(users), "alice", "--delete", timeout=60)
    assert r.returncode == 0 and r.stdout == f"deleted alice from {users}\n"
    assert "alice" not in users.read_text()
