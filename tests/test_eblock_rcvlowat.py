"""A MODE E receiving stream batches its reads with SO_RCVLOWAT
(docs/DESIGN.md#eblock-rcvlowat) yet a small last block and EOD on a
stream that stays open still end the transfer (Stream.batch_reads); a
sending stream's EOD is not held by Nagle (docs/DESIGN.md#eod-nodelay)."""

import gc
import socket
import threading
import time

from conftest import PASSWORD, USER
from test_eblock_server import Ctl, Receiver, block, put_mode_e, stream

from drsftp.ftp.eblock import Desc, header
from drsftp.io import sockopt
from drsftp.server.app import ServerConfig, build_server
from drsftp.server.ftp.eblock.streams import Stream
from drsftp.tuning import Role
from drsftp.tuning.actuation import READ_BATCH_MAX

BIG = 4 << 20  # one block the sender has committed to


def _receiving_streams():
    return [o for o in gc.get_objects() if isinstance(o, Stream) and o.role is Role.RECEIVER and not o.closed]


def _wait(cond):
    for _ in range(250):  # bounded: 5 s
        if cond():
            return True
        time.sleep(0.02)
    return False


class _Serving:
    """build_server's server run on a thread of the test's own."""

    def __init__(self, root):
        # a fixed 8 MiB window: a read batch of READ_BATCH_MAX; a stall would end in 426
        cfg = ServerConfig(root=str(root), user=USER, password=PASSWORD, port=0, tuning="fixed:8M",
                           data_timeout=3.0)
        self.server = build_server(cfg)
        self.port = self.server.socket.getsockname()[1]
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        while not self.stop.is_set():
            self.server.ioloop.loop(timeout=0.05, blocking=False)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        self.thread.join(10)
        self.server.close_all()


def test_a_receiving_stream_batches_reads_and_a_small_last_block_ends(tmp_path):
    root = tmp_path / "srv"
    root.mkdir()
    with _Serving(root) as srv_:
        ctl = Ctl(srv_.port)
        big = bytes(range(256)) * (BIG // 256)
        port = put_mode_e(ctl, "a.bin")
        s = stream(port)
        s.sendall(header(0, BIG, 0) + big[:1 << 20])  # a block's first MiB: 3 MiB more are committed
        # a read leaves 3 MiB and more committed: the mark goes to the batch
        # (the rest of the MiB may then wait below it: nothing more comes yet)
        assert _wait(lambda: [x for x in _receiving_streams() if x.moved])
        (srv,) = _receiving_streams()
        lowat = srv.socket.getsockopt(socket.SOL_SOCKET, socket.SO_RCVLOWAT)
        assert lowat == srv.low_water == READ_BATCH_MAX
        # the block's rest, then a small block and EOD+EOF: below the batch
        s.sendall(big[1 << 20:] + block(BIG, b"t" * 100) + header(Desc.EOD | Desc.EOF, 0, 1))
        code, text, _ = ctl.final()
        assert code == "226", text
        assert (root / "a.bin").read_bytes() == big + b"t" * 100
        assert srv.socket.getsockopt(socket.SOL_SOCKET, socket.SO_RCVLOWAT) == 1  # after the EOD
        # the same (cached) stream's next transfer: one small block alone
        assert ctl.cmd("STOR b.bin")[0] == "125"  # (reusing the stream)
        s.sendall(block(0, b"u" * 10) + header(Desc.EOD | Desc.EOF, 0, 1))
        code, text, _ = ctl.final()
        assert code == "226", text
        assert (root / "b.bin").read_bytes() == b"u" * 10
        ctl.close()
        s.close()


def test_a_sending_stream_sends_its_eod_without_nagle(tmp_path, monkeypatch):
    set_nodelay, seen = sockopt.set_nodelay, []

    def spy(sock):  # what the socket holds once set (the receiver may close it right after)
        set_nodelay(sock)
        seen.append(sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))

    monkeypatch.setattr(sockopt, "set_nodelay", spy)
    root = tmp_path / "srv"
    root.mkdir()
    (root / "f.bin").write_bytes(b"n" * 100_003)  # a tail short of a segment
    with _Serving(root) as srv_:
        ctl = Ctl(srv_.port)
        rx = Receiver(100_003)
        rx.gate.set()
        assert ctl.cmd("MODE E")[0] == "200"
        assert ctl.cmd("OPTS RETR Parallelism=2,2,2;")[0] == "200"
        assert ctl.cmd(rx.port_cmd)[0] == "200"
        assert ctl.cmd("RETR f.bin")[0] == "150"
        rx.accept(2)
        assert ctl.final()[0] == "226"
        rx.join()
        assert seen and all(seen)  # each stream that sent its EOD
        ctl.close()
