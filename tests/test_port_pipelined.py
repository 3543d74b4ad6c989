"""drsftp serve: PORT/EPRT and the transfer command in one write.  In
stream mode pyftpdlib answers PORT once its connection is made; the
commands read behind it wait for that reply, so replies keep the
commands' order (RFC 959 4.2: 200, then 1yz, 226) and the transfer runs
on (server/ftp/stream/channel.py DRSActiveDTP, server/ftp/waiting.py)."""

import socket
import threading

import pytest
from conftest import make_file, running_server
from test_eblock_server import Ctl, Receiver

SIZE = 30 << 20  # stalled at 398,848 bytes when the RETR came with the PORT


def data_address_cmd(verb, port):
    if verb == "PORT":
        return f"PORT 127,0,0,1,{port >> 8},{port & 255}"
    return f"EPRT |1|127.0.0.1|{port}|"


class Sink:
    """Accepts one stream-mode data connection and reads it to its end."""

    def __init__(self):
        self.lst = socket.create_server(("127.0.0.1", 0))
        self.lst.settimeout(20)
        self.got = bytearray()
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    @property
    def port(self):
        return self.lst.getsockname()[1]

    def _read(self):
        s, _ = self.lst.accept()
        s.settimeout(20)
        with s:
            while data := s.recv(1 << 20):
                self.got.extend(data)


@pytest.fixture
def root(tmp_path):
    r = tmp_path / "srv"
    r.mkdir()
    make_file(r / "f.bin", SIZE, seed=11)
    return r


@pytest.mark.parametrize("verb", ["PORT", "EPRT"])
def test_stream_mode_port_and_retr_in_one_write(root, verb):
    with running_server(root) as srv:
        ctl = Ctl(srv.port)
        sink = Sink()
        ctl.sock.sendall(f"{data_address_cmd(verb, sink.port)}\r\nRETR f.bin\r\n".encode())
        replies = [ctl.reply()[0] for _ in range(3)]
        sink.thread.join(30)
        ctl.close()
    assert replies[0] == "200" and replies[1] in ("125", "150") and replies[2] == "226", replies
    assert bytes(sink.got) == (root / "f.bin").read_bytes()


def test_stream_mode_port_and_stor_in_one_write(root, tmp_path):
    payload = (root / "f.bin").read_bytes()[: 5 << 20]
    with running_server(root) as srv:
        ctl = Ctl(srv.port)
        lst = socket.create_server(("127.0.0.1", 0))
        lst.settimeout(20)
        ctl.sock.sendall(f"{data_address_cmd('PORT', lst.getsockname()[1])}\r\nSTOR up.bin\r\n".encode())
        conn, _ = lst.accept()
        assert ctl.reply()[0] == "200"
        assert ctl.reply()[0] in ("125", "150")
        conn.sendall(payload)
        conn.close()
        code, text, _ = ctl.final()
        ctl.close()
    assert code == "226", text
    assert (root / "up.bin").read_bytes() == payload


def test_a_port_that_cannot_connect_is_answered_before_the_retr(root):
    closed = socket.create_server(("127.0.0.1", 0))
    port = closed.getsockname()[1]
    closed.close()  # nothing listens there
    with running_server(root) as srv:
        ctl = Ctl(srv.port)
        ctl.sock.sendall(f"{data_address_cmd('PORT', port)}\r\nRETR f.bin\r\nNOOP\r\n".encode())
        replies = [ctl.reply()[0] for _ in range(3)]
        ctl.close()
    # PORT's 425, then the RETR's own 425 (no data connection open or
    # coming: finalreply.py), then NOOP's 200
    assert replies == ["425", "425", "200"], replies


@pytest.mark.parametrize("verb", ["PORT", "EPRT"])
def test_mode_e_port_and_retr_in_one_write(root, verb):
    with running_server(root) as srv:
        ctl = Ctl(srv.port)
        assert ctl.cmd("MODE E")[0] == "200"
        rx = Receiver(SIZE)
        rx.gate.set()
        ctl.sock.sendall(f"{data_address_cmd(verb, rx.lst.getsockname()[1])}\r\nRETR f.bin\r\n".encode())
        rx.accept(1)
        replies = [ctl.reply()[0] for _ in range(3)]
        rx.join()
        ctl.close()
    assert replies == ["200", "150", "226"], replies
    assert rx.ledger.complete and bytes(rx.buf) == (root / "f.bin").read_bytes()


def test_a_port_released_after_a_mode_e_transfer_is_answered_before_the_retr_behind_it(root):
    """MODE S, PORT and RETR wait behind a MODE E transfer; released, the
    PORT connects before the RETR runs, as if sent alone."""
    with running_server(root) as srv:
        ctl = Ctl(srv.port)
        rx = Receiver(SIZE)  # its readers wait on its gate: the RETR keeps running
        assert ctl.cmd("MODE E")[0] == "200"
        assert ctl.cmd(rx.port_cmd)[0] == "200"
        assert ctl.cmd("RETR f.bin")[0] == "150"
        rx.accept(1)
        sink = Sink()
        ctl.sock.sendall(f"MODE S\r\n{data_address_cmd('PORT', sink.port)}\r\nRETR f.bin\r\n".encode())
        rx.gate.set()
        replies = [ctl.reply()[0] for _ in range(5)]
        rx.join()
        sink.thread.join(30)
        ctl.close()
    assert replies[:3] == ["226", "200", "200"] and replies[3] in ("125", "150") and replies[4] == "226", replies
    assert bytes(sink.got) == (root / "f.bin").read_bytes()
