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

import pytest
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


@contextlib.contextmanager
def listed_peer_server(tmp_path):
    """A server that lists 127.0.0.2 as a third-party peer, run in this
    process: (port, ioloop, withdraw), ``withdraw()`` taking the peer off
    by a reload."""
    root = tmp_path / "srv"
    root.mkdir(exist_ok=True)
    conf = tmp_path / "drsftp.toml"
    head = f'root = "srv"\nuser = "{USER}"\npassword = "{PASSWORD}"\n'
    conf.write_text(head + 'third_party_peers = ["127.0.0.2"]\n')
    cfg = ServerConfig(root=str(root), port=0, user=USER, password=PASSWORD, config_file=str(conf),
                       third_party_peers=["127.0.0.2"])
    with held_server(root, cfg) as (port, ioloop, _, server):
        def withdraw():
            conf.write_text(head)
            assert reload(server, cfg)

        yield port, ioloop, withdraw


def from_peer(port: int) -> socket.socket:
    """A data connection to the passive port from the peer's address."""
    s = socket.socket()
    s.settimeout(10)
    s.bind(("127.0.0.2", 0))
    s.connect(("127.0.0.1", port))
    return s


def closed_by_server(s: socket.socket) -> bool:
    try:
        return s.recv(1) == b""
    except OSError:
        return True


@pytest.mark.parametrize("mode", ["S", "E"])
@pytest.mark.parametrize("peer_first", [True, False], ids=["peer-came-first", "stor-first"])
def test_a_stor_on_a_withdrawn_peers_passive_port_is_refused_at_once(tmp_path, mode, peer_first):
    """PASV, then a reload takes the peer off: the listener is the peer's
    (it came to it, or comes while the STOR waits), and no connection it
    takes will come, so the STOR gets 425 at once and the passive port is
    closed (docs/SECURITY.md), not 150 and the data timeout's 421."""
    with listed_peer_server(tmp_path) as (port, ioloop, withdraw):
        ctl = Ctl(port)
        if mode == "E":
            assert ctl.cmd("MODE E")[0] == "200"
        p = ctl.pasv()
        if peer_first and mode == "E":  # a stream the listener took while the peer was listed (cached)
            peer = from_peer(p)
            assert wait_until(lambda: any(len(getattr(getattr(h, "eblock", None), "streams", ())) == 1
                                          for h in list(ioloop.socket_map.values())), 10)
            withdraw()
            code, text = ctl.cmd("STOR g.bin")
        elif peer_first:  # (stream mode: one taken before would be the data connection)
            withdraw()
            peer = from_peer(p)
            assert closed_by_server(peer)  # dropped, and the port closed with it
            code, text = ctl.cmd("STOR g.bin")
        else:
            withdraw()
            code, text = ctl.cmd("STOR g.bin")
            assert code == "150", text  # (nobody came yet: the client itself may)
            peer = from_peer(p)
            code, text = ctl.reply()
        assert code == "425", text
        if mode == "E" or not peer_first:
            assert "127.0.0.2 was taken off --third-party-peers" in text, text
        assert closed_by_server(peer)
        assert ctl.cmd("STOR g.bin")[0] == "425"  # the passive port is gone: PASV again
        with contextlib.suppress(ConnectionRefusedError, TimeoutError):
            socket.create_connection(("127.0.0.1", p), timeout=5).close()
            raise AssertionError("the passive port still listens")
        assert not (tmp_path / "srv" / "g.bin").exists()
        peer.close()
        ctl.close()
