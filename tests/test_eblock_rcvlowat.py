"""A MODE E receiving stream batches its reads with SO_RCVLOWAT
(docs/DESIGN.md#rcvlowat) yet a small last block and EOD on a stream that
stays open still end the transfer (Stream.batch_reads)."""

import gc
import socket
import threading
import time

from conftest import PASSWORD, USER
from test_eblock_server import Ctl, block, put_mode_e, stream

from drsftp.ftp.eblock import Desc, header
from drsftp.server.app import ServerConfig, build_server
from drsftp.server.estreams import Stream
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


def test_a_receiving_stream_batches_reads_and_a_small_last_block_ends(tmp_path):
    root = tmp_path / "srv"
    root.mkdir()
    # a fixed 8 MiB window: a read batch of READ_BATCH_MAX; a stall would end in 426
    cfg = ServerConfig(root=str(root), user=USER, password=PASSWORD, port=0, tuning="fixed:8M", data_timeout=3.0)
    server = build_server(cfg)
    stop = threading.Event()

    def run():
        while not stop.is_set():
            server.ioloop.loop(timeout=0.05, blocking=False)

    t = threading.Thread(target=run, daemon=True)
    t.start()
    try:
        ctl = Ctl(server.socket.getsockname()[1])
        big = bytes(range(256)) * (BIG // 256)
        port = put_mode_e(ctl, "a.bin")
        s = stream(port)
        s.sendall(header(0, BIG, 0) + big[:1 << 20])  # a block's first MiB: 3 MiB more are committed
        assert _wait(lambda: [x for x in _receiving_streams() if x.moved >= 1 << 20])
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
    finally:
        stop.set()
        t.join(10)
        server.close_all()
