"""drsftp serve, MODE E: transfer commands sent while one runs wait for it
and run in order on the cached streams (GridFTP's -pp; docs/EBLOCK.md,
"Pipelined transfers"); replies keep the commands' order (RFC 959 4.2)."""

import socket
import threading

from conftest import make_file, running_server
from test_eblock_server import Ctl, Receiver

from drsftp.ftp.eblock import BlockDecoder, EndOfData, EndOfFile, ReceiveLedger

SIZES = {"a.bin": 300_000, "b.bin": 0, "c.bin": 1 << 20}


def _tree(root):
    for i, (name, size) in enumerate(SIZES.items()):
        make_file(root / name, size, seed=i)


class CachedReader:
    """Accepts the server's streams and splits each stream's bytes into
    transfers at its EODs (the next transfer's blocks follow on the same
    connection)."""

    def __init__(self, files):
        self.lst = socket.create_server(("127.0.0.1", 0))
        self.lst.settimeout(10)
        self.files = files
        self.bufs = [bytearray() for _ in files]
        self.ledgers = [ReceiveLedger() for _ in files]
        self.lock = threading.Lock()
        self.threads = []

    @property
    def port_cmd(self):
        p = self.lst.getsockname()[1]
        return f"PORT 127,0,0,1,{p >> 8},{p & 255}"

    def accept(self, n):
        for _ in range(n):
            s, _ = self.lst.accept()
            t = threading.Thread(target=self._read, args=(s,), daemon=True)
            t.start()
            self.threads.append(t)

    def _read(self, s):
        dec, k, pending = BlockDecoder(), 0, b""
        s.settimeout(20)
        while k < len(self.files):
            data = pending or s.recv(1 << 20)
            pending = b""
            if not data:
                return
            events, used = dec.feed_some(data, stop_at_eod=True)
            pending = bytes(data[used:])
            with self.lock:
                for ev in events:
                    self.ledgers[k].apply(ev)
                    if not isinstance(ev, (EndOfData, EndOfFile)):
                        buf = self.bufs[k]
                        end = ev.offset + len(ev.data)
                        if len(buf) < end:
                            buf.extend(b"\0" * (end - len(buf)))
                        buf[ev.offset:end] = ev.data
            if dec.ended:
                k += 1
                dec.reset()

    def join(self):
        for t in self.threads:
            t.join(20)


def running_retr(ctl):
    """MODE E, PORT and RETR big.bin (24 MiB) on one stream; the receiver's
    readers wait on its gate, so the RETR stays running until it is set."""
    rx = Receiver(24 << 20)
    assert ctl.cmd("MODE E")[0] == "200"
    assert ctl.cmd(rx.port_cmd)[0] == "200"
    assert ctl.cmd("RETR big.bin")[0] == "150"
    rx.accept(1)
    return rx


def test_pipelined_retrs_run_in_order_on_the_cached_streams(tmp_path):
    root = tmp_path / "srv"
    root.mkdir()
    _tree(root)
    names = list(SIZES)
    with running_server(root) as srv:
        ctl = Ctl(srv.port)
        rx = CachedReader(names)
        assert ctl.cmd("MODE E")[0] == "200"
        assert ctl.cmd("OPTS RETR Parallelism=2,2,2;")[0] == "200"
        assert ctl.cmd(rx.port_cmd)[0] == "200"
        # every command in one write: the later RETRs wait for the running one
        ctl.sock.sendall("".join(f"RETR {n}\r\n" for n in names).encode() + b"NOOP\r\n")
        rx.accept(2)
        replies = [ctl.reply()[0] for _ in range(2 * len(names) + 1)]
        rx.join()
        ctl.close()
    assert replies == ["150", "226", "125", "226", "125", "226", "200"], replies
    for i, name in enumerate(names):
        want = (root / name).read_bytes()
        assert rx.ledgers[i].complete and rx.ledgers[i].eod_count == 2, name
        assert bytes(rx.bufs[i]) == want, name


def test_drs_is_answered_while_transfers_wait(tmp_path):
    """DRS is not held: its marked reply comes during the running transfer,
    before the waiting RETR's (docs/PROTOCOL.md)."""
    root = tmp_path / "srv"
    root.mkdir()
    make_file(root / "big.bin", 24 << 20, seed=3)
    make_file(root / "a.bin", 1000, seed=4)
    with running_server(root) as srv:
        ctl = Ctl(srv.port)
        rx = running_retr(ctl)
        ctl.sock.sendall(b"RETR a.bin\r\nDRS rtt_us=100000 rate=1000000\r\n")
        code, text = ctl.reply()
        assert code == "200" and text[4:].startswith("DRS "), text
        assert ctl.cmd("ABOR")[0] == "426"  # the running RETR's final reply
        assert ctl.reply()[0] == "426"  # the waiting RETR: not run
        assert ctl.reply()[0] == "226"  # ABOR's own
        assert ctl.cmd("NOOP")[0] == "200"  # the session goes on
        rx.gate.set()
        ctl.close()


def test_more_waiting_commands_than_the_bound_end_the_session(tmp_path):
    root = tmp_path / "srv"
    root.mkdir()
    make_file(root / "big.bin", 24 << 20, seed=3)
    with running_server(root) as srv:
        ctl = Ctl(srv.port)
        rx = running_retr(ctl)
        ctl.sock.sendall(b"REST 0\r\n" + b"NOOP\r\n" * 64)
        code, text = ctl.reply()
        assert code == "421", text
        ctl.sock.settimeout(10)
        assert ctl.f.read() == b""  # closed after the 421
        rx.gate.set()
        ctl.close()
        # the server is still up for others
        other = Ctl(srv.port)
        assert other.cmd("NOOP")[0] == "200"
        other.close()


def test_any_command_during_a_mode_e_transfer_waits_for_it(tmp_path):
    """SIZE sent while a RETR runs is answered after the RETR's 226 (a
    pipelining client pairs replies in order)."""
    root = tmp_path / "srv"
    root.mkdir()
    make_file(root / "big.bin", 24 << 20, seed=3)
    with running_server(root) as srv:
        ctl = Ctl(srv.port)
        rx = running_retr(ctl)
        ctl.sock.sendall(b"SIZE big.bin\r\n")
        rx.gate.set()  # the transfer runs to its end
        assert ctl.reply()[0] == "226"
        assert ctl.reply()[0] == "213"
        rx.join()
        ctl.close()



def test_drs_during_a_hash_gets_a_marked_reply(tmp_path):
    """A DRS sent while HASH computes is answered with its mark, never the
    unmarked 503 a client would pair with the HASH (docs/PROTOCOL.md)."""
    root = tmp_path / "srv"
    root.mkdir()
    make_file(root / "big.bin", 48 << 20, seed=5)
    with running_server(root) as srv:
        ctl = Ctl(srv.port)
        ctl.sock.sendall(b"HASH big.bin\r\nDRS rtt_us=100000 rate=1000000\r\n")
        texts = [ctl.reply()[1] for _ in range(2)]
        ctl.close()
    assert sum(t.startswith("213 ") for t in texts) == 1, texts
    assert sum(t[4:].startswith("DRS") for t in texts) == 1, texts


def test_commands_waiting_behind_a_failed_transfer_are_not_run(tmp_path):
    root = tmp_path / "srv"
    root.mkdir()
    make_file(root / "big.bin", 24 << 20, seed=3)
    make_file(root / "a.bin", 1000, seed=4)
    with running_server(root) as srv:
        ctl = Ctl(srv.port)
        lst = socket.create_server(("127.0.0.1", 0))
        lst.settimeout(10)
        p = lst.getsockname()[1]
        assert ctl.cmd("MODE E")[0] == "200"
        assert ctl.cmd(f"PORT 127,0,0,1,{p >> 8},{p & 255}")[0] == "200"
        assert ctl.cmd("RETR big.bin")[0] == "150"
        conn, _ = lst.accept()
        ctl.sock.sendall(b"RETR a.bin\r\nNOOP\r\nDRS rtt_us=100000\r\n")
        code, text = ctl.reply()  # DRS passes: the two before it are waiting by now
        assert code == "200" and text[4:].startswith("DRS"), text
        conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
        conn.close()  # a reset: the running RETR fails
        # the RETR's own final reply: 426 (RFC 959: the connection was open,
        # then closed), also when the reset beats the server's own look at
        # the connect it had made
        code, text = ctl.reply()
        assert code == "426", text
        code, text = ctl.reply()
        assert code == "426" and "not run" in text, text  # the waiting RETR
        assert ctl.reply()[0] == "426"  # and the NOOP behind it
        assert ctl.cmd("NOOP")[0] == "200"
        ctl.close()
        lst.close()
