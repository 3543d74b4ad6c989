"""Faults of a third-party copy (docs/THIRDPARTY.md, "Faults"), between a
slow `drsftp serve` source (tests/slowserve.py: the copy is caught in the
middle) and a `drsftp serve` destination on 127.0.0.1:

- the source killed mid-transfer: the copy fails in one sentence, B keeps
  its part file, and a rerun with --continue moves only what B lacks;
- the client killed: both servers end the transfer within their data
  timeout and leave the part file, nothing renamed;
- a destination that refuses: one sentence, exit 1;
- a destination that drops the source's data connection: the sentence
  names it and --third-party-peers, whichever reply comes first."""

from __future__ import annotations

import json
import os
import signal
import subprocess

from conftest import PASSWORD, PY, USER, ServerProcess, make_file, running_server, sha256_file, wait_until
from test_copy import slow_server, transfer_lines

MiB = 1 << 20
SIZE = 6 * MiB + 11
RATE = 1_000_000  # B/s the slow source sends (in bursts of that much, then a pause)


# `drsftp serve` whose passive listener accepts a connection only once SIZE
# bytes wait in it (at most 10 s), and gives up waiting for one after 3 s:
# the source has sent the whole file into the kernel, and said 226, before
# the destination drops the connection.
LATE_ACCEPT = r"""
import fcntl, struct, sys, termios, time
from pyftpdlib.servers import FTPServer
from drsftp.server.app import ServerConfig, build_server
from drsftp.server.ops.translog import configure
root, user, password, size = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
configure(None, "text")
served = build_server(ServerConfig(root=root, port=0, user=user, password=password))
served.close()
def queued(sock):
    return struct.unpack("i", fcntl.ioctl(sock.fileno(), termios.FIONREAD, b"\0" * 4))[0]
class LateAccept(served.handler.passive_dtp):
    timeout = 3
    def handle_accepted(self, sock, addr):
        end = time.monotonic() + 10
        while queued(sock) < size and time.monotonic() < end:
            time.sleep(0.01)
        super().handle_accepted(sock, addr)
server = FTPServer(("127.0.0.1", 0), type("LateHandler", (served.handler,), {"passive_dtp": LateAccept}))
print(f"late-accepting drsftp server on 127.0.0.1:{server.socket.getsockname()[1]} (test)", flush=True)
server.serve_forever()
"""


def _start_copy(src_url, dst_url, *extra):
    return subprocess.Popen([PY, "-m", "drsftp", "copy", src_url, dst_url, "--progress", "never", *extra],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def _part(root, name):
    return os.path.join(str(root), f".{name}.part")  # drsftp serve's part file (docs/SECURITY.md)


def _midway(part):
    return os.path.exists(part) and 0 < os.path.getsize(part) < SIZE


def test_source_killed_mid_transfer_then_continue_moves_only_the_rest(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    src = make_file(a / "f.bin", SIZE, seed=21)
    with running_server(b) as sb:
        sa = slow_server(a, RATE)
        try:
            client = _start_copy(sa.url("f.bin"), sb.url("g.bin"))
            assert wait_until(lambda: _midway(_part(b, "g.bin")), timeout=30)
            sa.proc.send_signal(signal.SIGKILL)
            _, err = client.communicate(timeout=60)
        finally:
            sa.stop()
        assert client.returncode == 1
        assert err.count("\n") == 1 and "lost the control connection to the source" in err, err
        assert "--continue" in err
        held = os.path.getsize(_part(b, "g.bin"))
        assert 0 < held < SIZE and not os.path.exists(b / "g.bin")
        with running_server(a) as sa2:
            out = tmp_path / "c.json"
            r = subprocess.run([PY, "-m", "drsftp", "copy", sa2.url("f.bin"), sb.url("g.bin"), "--continue",
                                "--progress", "never", "--json", str(out)], capture_output=True, text=True, timeout=60)
            assert r.returncode == 0, r.stderr
            assert f"bytes={SIZE - held} " in transfer_lines(sa2)[-1]  # the source sent only the rest
        assert f"bytes={SIZE - held} " in transfer_lines(sb)[-1]
    with open(out) as f:
        d = json.load(f)
    assert d["resumed_from"] == held and d["bytes"] == SIZE - held
    assert sha256_file(b / "g.bin") == sha256_file(src)


def test_client_killed_both_servers_end_within_the_data_timeout_nothing_renamed(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    make_file(a / "f.bin", SIZE, seed=22)
    timeout = 3.0
    with running_server(b, "--data-timeout", str(timeout)) as sb:
        sa = slow_server(a, RATE, str(timeout))
        try:
            client = _start_copy(sa.url("f.bin"), sb.url("g.bin"))
            assert wait_until(lambda: _midway(_part(b, "g.bin")), timeout=30)
            client.send_signal(signal.SIGKILL)
            client.communicate(timeout=30)
            # each server logs the transfer's end: not complete
            for srv in (sa, sb):
                assert wait_until(lambda s=srv: any("complete=no" in x for x in transfer_lines(s)),
                                  timeout=timeout + 10), srv.stderr_text()[-2000:]
        finally:
            sa.stop()
    held = os.path.getsize(_part(b, "g.bin"))
    assert 0 < held < SIZE
    assert not os.path.exists(b / "g.bin")  # nothing renamed into place
    assert os.path.getsize(a / "f.bin") == SIZE


def test_a_destination_that_refuses_is_one_sentence_and_exit_1(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    make_file(a / "f.bin", 2 * MiB, seed=23)
    with running_server(a) as sa, running_server(b, "--read-only") as sb:
        for extra in ((), ("-P", "4")):
            r = subprocess.run([PY, "-m", "drsftp", "copy", sa.url("f.bin"), sb.url("g.bin"), "--progress", "never",
                                *extra], capture_output=True, text=True, timeout=60)
            assert r.returncode == 1, r.stderr
            assert r.stderr.count("\n") == 1 and r.stderr.startswith("drsftp: error: STOR /g.bin failed on the"
                                                                     " destination"), r.stderr
            assert "Traceback" not in r.stderr
        assert os.listdir(b) == []


def test_max_time_stops_both_servers_and_continue_finishes(tmp_path):
    """--max-time: ABOR to both (RFC 959 4.1.3), what arrived kept, exit 28."""
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    src = make_file(a / "f.bin", SIZE, seed=24)
    out = tmp_path / "m.json"
    with running_server(b) as sb:
        sa = slow_server(a, RATE)
        try:
            r = subprocess.run([PY, "-m", "drsftp", "copy", sa.url("f.bin"), sb.url("g.bin"), "--max-time", "1.5",
                                "--progress", "never", "--json", str(out)], capture_output=True, text=True,
                               timeout=60)
            assert r.returncode == 28, r.stderr
            assert "complete=no" in transfer_lines(sa)[-1] and "complete=no" in transfer_lines(sb)[-1]
        finally:
            sa.stop()
        with open(out) as f:
            d = json.load(f)
        held = os.path.getsize(_part(b, "g.bin"))
        assert not d["complete"] and 0 < held < SIZE
        with running_server(a) as sa2:
            r = subprocess.run([PY, "-m", "drsftp", "copy", sa2.url("f.bin"), sb.url("g.bin"), "--continue",
                                "--progress", "never"], capture_output=True, text=True, timeout=60)
            assert r.returncode == 0, r.stderr
    assert sha256_file(b / "g.bin") == sha256_file(src)


def test_a_destination_that_drops_the_sources_data_connection_is_named_with_third_party_peers(tmp_path):
    """The source's data connections leave from 127.0.0.2 (--data-interface),
    which the destination, whose client is 127.0.0.1, does not list: it
    drops them unanswered and the source says 426.  The sentence names the
    destination and --third-party-peers, not the source's 426 with a
    --continue that cannot help."""
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    make_file(a / "f.bin", 2 * MiB, seed=25)
    env = dict(os.environ, XDG_STATE_HOME=str(tmp_path / "state"))  # (-P 2: MODE E resume records)
    with running_server(a, "--data-interface", "127.0.0.2") as sa, running_server(b) as sb:
        for extra in ((), ("-P", "2")):
            r = subprocess.run([PY, "-m", "drsftp", "copy", sa.url("f.bin"), sb.url("g.bin"), "--progress", "never",
                                *extra], capture_output=True, text=True, timeout=60, env=env)
            assert r.returncode == 1, r.stderr
            assert r.stderr.count("\n") == 1 and "Traceback" not in r.stderr, r.stderr
            assert r.stderr.startswith(f"drsftp: error: the destination 127.0.0.1:{sb.port} did not take the data"
                                       " connection from the source"), r.stderr
            assert "--third-party-peers" in r.stderr and "--continue" not in r.stderr, r.stderr
        assert os.listdir(b) == []


def test_a_dropped_connection_the_source_filled_before_the_drop_is_named_too(tmp_path):
    """The interleaving of a loaded machine, made certain: the destination
    accepts the source's connection only once the whole file waits in it.
    The source has said 226 (or 426 at the drop), the destination's
    listener then gives up (421): still the sentence naming the
    destination, not its 421 with a --continue that cannot help."""
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    size = 100_000  # fits the sockets' buffers on loopback
    make_file(a / "f.bin", size, seed=26)
    late = ServerProcess(b, cmd=[PY, "-c", LATE_ACCEPT, str(b), USER, PASSWORD, str(size)])
    try:
        with running_server(a, "--data-interface", "127.0.0.2") as sa:
            r = subprocess.run([PY, "-m", "drsftp", "copy", sa.url("f.bin"), late.url("g.bin"), "--progress",
                                "never"], capture_output=True, text=True, timeout=60)
            logs = f"{r.stderr}\nsource:\n{sa.stderr_text()[-3000:]}\ndestination:\n{late.stderr_text()[-3000:]}"
    finally:
        late.stop()
    assert r.returncode == 1, logs
    assert r.stderr.count("\n") == 1 and "Traceback" not in r.stderr, logs
    assert r.stderr.startswith(f"drsftp: error: the destination 127.0.0.1:{late.port} did not take the data"
                               " connection from the source"), logs
    assert "--third-party-peers" in r.stderr and "--continue" not in r.stderr, logs
    assert "dropped a data connection from 127.0.0.2" in logs  # the drop happened, after the bytes came
