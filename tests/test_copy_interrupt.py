"""An interrupted copy stops on both servers (docs/THIRDPARTY.md, "Faults
and resume"): Ctrl-C aborts both transfers (ABOR) before the client exits
130, and a `drsftp serve` never renames a stream-mode upload into place
once its control connection is gone, nor lets two sessions write one part
file."""

from __future__ import annotations

import ftplib
import os
import signal
import socket
import subprocess

from conftest import PY, ftp_session, make_file, running_server, sha256_file, wait_until
from test_copy import slow_server, transfer_lines

MiB = 1 << 20
SIZE = 6 * MiB + 5
RATE = 1_000_000  # B/s from the slow source: the copy is still running at the interrupt
PRECIOUS = b"precious: not to be overwritten by half a copy\n"


def default_sigint():
    """The child takes SIGINT as Python's default (KeyboardInterrupt), also
    when the suite runs under nohup (which ignores SIGINT, and children
    inherit that)."""
    signal.signal(signal.SIGINT, signal.default_int_handler)


def start_client(*args):
    return subprocess.Popen([PY, "-m", "drsftp", *args, "--progress", "never"], stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True, preexec_fn=default_sigint)


def part(root, name):
    return os.path.join(str(root), f".{name}.part")


def test_ctrl_c_aborts_both_transfers_keeps_the_target_and_continue_completes(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    src = make_file(a / "f.bin", SIZE, seed=41)
    (b / "precious.txt").write_bytes(PRECIOUS)
    with running_server(b, "-vv") as sb:
        sa = slow_server(a, RATE)
        try:
            client = start_client("copy", sa.url("f.bin"), sb.url("precious.txt"))
            assert wait_until(lambda: os.path.exists(part(b, "precious.txt"))
                              and os.path.getsize(part(b, "precious.txt")) > 0, timeout=30)
            client.send_signal(signal.SIGINT)
            _, err = client.communicate(timeout=30)
            assert client.returncode == 130, err
            assert "interrupted" in err and "Traceback" not in err
            # the destination was sent ABOR first (the source's transfer then ends with the data
            # connection, or at its own ABOR), and both servers ended the transfer, not complete
            assert "<- ABOR" in sb.stderr_text()
            for srv in (sa, sb):
                assert wait_until(lambda s=srv: any("complete=no" in x for x in transfer_lines(s)), timeout=10), \
                    srv.stderr_text()[-2000:]
            held = os.path.getsize(part(b, "precious.txt"))
            assert 0 < held < SIZE
            # nothing goes on: the part file stops growing, the target stays as it was
            assert not wait_until(lambda: os.path.getsize(part(b, "precious.txt")) != held, timeout=1.5)
            assert (b / "precious.txt").read_bytes() == PRECIOUS
            r = subprocess.run([PY, "-m", "drsftp", "copy", sa.url("f.bin"), sb.url("precious.txt"), "--continue",
                                "--progress", "never"], capture_output=True, text=True, timeout=60)
            assert r.returncode == 0, r.stderr
            ends = [x for x in transfer_lines(sb) if " transfer peer=" in x]
            assert f"bytes={SIZE - held} " in ends[-1] and "complete=yes" in ends[-1]  # only the rest moved
        finally:
            sa.stop()
    assert sha256_file(b / "precious.txt") == sha256_file(src)
    assert sorted(os.listdir(b)) == ["precious.txt"]


def _stor_started(port, name, first):
    """A stream-mode STOR on a session of its own, ``first`` bytes sent and
    its data connection left open: (session, data socket)."""
    ftp = ftp_session(port)
    host, dport = ftp.makepasv()
    data = socket.create_connection((host, dport))
    ftp.putcmd(f"STOR {name}")
    assert ftp.getresp().startswith("1")
    data.sendall(first)
    return ftp, data


def test_an_upload_whose_session_closed_is_never_renamed_into_place(tmp_path):
    """QUIT during an upload, the control connection closed, then the data
    connection's EOF: the EOF proves nothing once the session is gone."""
    root = tmp_path / "srv"
    root.mkdir()
    (root / "keep.txt").write_bytes(PRECIOUS)
    with running_server(root) as srv:
        ftp, data = _stor_started(srv.port, "keep.txt", b"x" * 100_000)
        assert wait_until(lambda: os.path.exists(part(root, "keep.txt"))
                          and os.path.getsize(part(root, "keep.txt")) == 100_000, timeout=10)
        ftp.putcmd("QUIT")
        ftp.sock.close()
        ftp.close()
        assert wait_until(lambda: "complete=no" in srv.stderr_text(), timeout=10), srv.stderr_text()[-2000:]
        data.close()
        assert not wait_until(lambda: (root / "keep.txt").read_bytes() != PRECIOUS, timeout=1.0)
    assert os.path.getsize(part(root, "keep.txt")) == 100_000


def test_quit_during_an_upload_still_finishes_it_for_a_client_that_waits(tmp_path):
    """RFC 959 4.1.1: the session stays for the transfer's final reply."""
    root = tmp_path / "srv"
    root.mkdir()
    with running_server(root) as srv:
        ftp, data = _stor_started(srv.port, "f.bin", b"y" * 50_000)
        ftp.putcmd("QUIT")
        assert ftp.getresp().startswith("221")
        data.close()
        assert ftp.getresp().startswith("226")
        ftp.close()
    assert (root / "f.bin").read_bytes() == b"y" * 50_000


def test_a_second_session_cannot_write_a_part_file_being_written(tmp_path):
    root = tmp_path / "srv"
    root.mkdir()
    with running_server(root) as srv:
        first, data = _stor_started(srv.port, "f.bin", b"1" * 70_000)
        second = ftp_session(srv.port)
        try:
            for cmd in ("STOR f.bin", "REST 70000", "STOR f.bin"):
                if cmd.startswith("REST"):
                    second.sendcmd(cmd)
                    continue
                second.makepasv()
                try:
                    second.sendcmd(cmd)
                    raise AssertionError(f"{cmd} was taken while another session writes the part file")
                except ftplib.error_temp as exc:
                    assert str(exc).startswith("450 "), exc
            data.close()
            assert first.getresp().startswith("226")
            assert (root / "f.bin").read_bytes() == b"1" * 70_000
            # once the first upload ended, the part name is free again
            with open(tmp_path / "up", "wb") as f:
                f.write(b"2" * 1000)
            with open(tmp_path / "up", "rb") as f:
                assert second.storbinary("STOR f.bin", f).startswith("226")
        finally:
            first.close()
            second.close()
    assert (root / "f.bin").read_bytes() == b"2" * 1000
    assert os.listdir(root) == ["f.bin"]
