"""A reload (SIGHUP) that takes a peer off --third-party-peers reaches the
sessions already open: a MODE E session's cached streams to it are closed
and its PORT address is forgotten at the next transfer (425), so no new
data connection goes to it (docs/DEPLOY.md, "Reload and stop").  The
server runs in this process (test_abor_order.held_server) so that
``reload`` is called directly; the
peer is another loopback address, 127.0.0.2."""

from __future__ import annotations

import contextlib
import socket
import threading

from conftest import PASSWORD, USER, make_file, wait_until
from test_abor_order import held_server
from test_eblock_server import Ctl

from drsftp.server.app import ServerConfig, reload


class Peer:
    """A listener on 127.0.0.2 that reads every stream to its end."""

    def __init__(self):
        self.lst = socket.create_server(("127.0.0.2", 0))
        self.lst.settimeout(10)
        self.open = 0
        self.ended = 0
        self.lock = threading.Lock()

    def accept(self, n):
        for _ in range(n):
            s, _ = self.lst.accept()
            with self.lock:
                self.open += 1
            threading.Thread(target=self._drain, args=(s,), daemon=True).start()

    def _drain(self, s):
        s.settimeout(20)
        try:
            while s.recv(1 << 20):
                pass
        except OSError:
            pass
        with self.lock:
            self.ended += 1
        s.close()


def test_a_reload_that_drops_a_peer_closes_its_streams_and_forgets_its_port(tmp_path):
    root = tmp_path / "srv"
    root.mkdir()
    make_file(root / "f.bin", 3 << 20, seed=5)
    conf = tmp_path / "drsftp.toml"
    head = f'root = "srv"\nuser = "{USER}"\npassword = "{PASSWORD}"\n'
    conf.write_text(head + 'third_party_peers = ["127.0.0.2"]\n')
    cfg = ServerConfig(root=str(root), port=0, user=USER, password=PASSWORD, config_file=str(conf),
                       third_party_peers=["127.0.0.2"])
    peer = Peer()
    with held_server(root, cfg) as (port, _, _, server), contextlib.closing(peer.lst):
        ctl = Ctl(port)
        p = peer.lst.getsockname()[1]
        assert ctl.cmd("MODE E")[0] == "200"
        assert ctl.cmd("OPTS RETR Parallelism=2,2,2;")[0] == "200"
        assert ctl.cmd(f"PORT 127,0,0,2,{p >> 8},{p & 255}")[0] == "200"  # a listed peer
        assert ctl.cmd("RETR f.bin")[0] == "150"
        peer.accept(2)
        assert ctl.final()[0] == "226"
        assert peer.ended == 0  # the two streams stay open for the next transfer (cached)
        conf.write_text(head)  # the peer taken off the list
        assert reload(server, cfg)
        code, text = ctl.cmd("RETR f.bin")
        assert code == "425" and "--third-party-peers" in text, text
        assert wait_until(lambda: peer.ended == 2, 10)  # its cached streams closed
        assert ctl.cmd("RETR f.bin")[0] == "425"  # the address is forgotten: PORT again
        assert ctl.cmd(f"PORT 127,0,0,2,{p >> 8},{p & 255}")[0] == "501"  # and refused now
        assert peer.open == 2  # no data connection went to it after the reload
        ctl.close()
