"""A stream-mode data connection of an FTPS session before its transfer
command (ftp/tls/data.py, ftp/tls/sscn.py): the test plays the other
end of the data connection (the other server of an FXP copy), the TLS
server when `drsftp serve` took the client's role with SSCN ON, the TLS
client otherwise.

- What comes before the STOR keeps the connection open: the TLS 1.3
  session tickets a TLS server sends after its handshake (RFC 8446 sec.
  4.6.1), a third-party source's first bytes (under PROT C as well).
  pyftpdlib closed the channel at either, unanswered, and the STOR got
  "425 ... none is open" (lftp's FXP with SSCN, under load).
- A handshake that fails before the STOR gives the STOR its 522 naming
  the reason (RFC 4217 sec. 10.2), not a reply at once that the client
  takes for its next command's.

Each step waits for the server's side of the last one by a reply or a
close on a socket the server writes to later (epoll hands a server the
data connection's event before the control connection's that came
after it), so the order is the same on every run."""

from __future__ import annotations

import contextlib
import socket
import ssl

import pytest
from test_third_party_server import Ctl, Server, pasv_address
from test_tls import certs  # noqa: F401 (a fixture)

PAYLOAD = bytes(range(256)) * 600  # 150 KiB: several TLS records


@contextlib.contextmanager
def tls_session(tmp_path, certs, sscn: bool, prot: str = "P"):  # noqa: F811
    """A `drsftp serve` with a certificate (and --require-tls under PROT
    P), a logged-in session on TLS with SSCN ON or OFF, and its PASV
    address."""
    root = tmp_path / "root"
    root.mkdir()
    srv = Server(root, tmp_path / "srv.log", "--tls-cert", str(certs.good), *(("--require-tls",) * (prot == "P")))
    ctl = None
    try:
        ctl = Ctl(srv.port).starttls(ssl.create_default_context(cafile=str(certs.ca))).login("PBSZ 0", f"PROT {prot}")
        assert ctl.cmd(f"SSCN {'ON' if sscn else 'OFF'}").startswith("200")
        yield ctl, pasv_address(ctl.cmd("PASV"))
    finally:
        if ctl is not None:
            ctl.close()
        srv.stop()


def refuse_handshake(data: socket.socket, sscn: bool) -> None:
    """A fatal handshake_failure alert to the server's ClientHello, or
    clear text to the server as the TLS server."""
    if sscn:
        assert data.recv(5)[:1] == b"\x16"  # the ClientHello's record (RFC 8446 sec. 5.1: handshake)
        data.sendall(b"\x15\x03\x03\x00\x02\x02\x28")  # alert, fatal, handshake_failure (sec. 6)
    else:
        data.sendall(b"GET / HTTP/1.0\r\n\r\n")


def tls_peer(data: socket.socket, certs, sscn: bool) -> ssl.SSLSocket:  # noqa: F811
    """The other end's TLS on the data connection, its handshake done."""
    if sscn:  # the server is the TLS client: the test serves, and sends its tickets with its handshake
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(str(certs.good))
        return ctx.wrap_socket(data, server_side=True)
    return ssl.create_default_context(cafile=str(certs.ca)).wrap_socket(data, server_hostname="127.0.0.1")


@pytest.mark.parametrize(("sscn", "prot", "early"), [(True, "P", "tickets"), (True, "P", "data"),
                                                     (False, "P", "data"), (False, "C", "data"),
                                                     (True, "P", "handshaking")],
                         ids=["tls-client-tickets", "tls-client-data", "tls-server-data", "prot-c-data",
                              "tls-client-handshaking"])
def test_what_comes_before_the_stor_keeps_the_data_connection(tmp_path, certs, sscn, prot, early):  # noqa: F811
    """PROT C on a TLS control connection too: the TLS data channel
    class read a plain connection's first bytes with no file to write.
    A connection still in its handshake is open as well: the STOR takes
    it (its ClientHello sent, unanswered yet)."""
    with tls_session(tmp_path, certs, sscn, prot) as (ctl, address), \
            socket.create_connection(address, timeout=20) as data:
        peer = tls_peer(data, certs, sscn) if prot == "P" and early != "handshaking" else data
        if early == "data":
            peer.sendall(PAYLOAD[:20000])
        assert ctl.cmd("NOOP").startswith("200")  # the server has read what came first
        reply = ctl.cmd("STOR dst.bin")
        assert reply.startswith("125"), reply
        if early == "handshaking":
            peer = tls_peer(data, certs, sscn)
        peer.sendall(PAYLOAD[20000:] if early == "data" else PAYLOAD)
        if prot == "P":
            peer = peer.unwrap()  # close_notify: the upload's end
        peer.close()
        assert ctl.reply().startswith("226")
        assert (tmp_path / "root" / "dst.bin").read_bytes() == PAYLOAD


@pytest.mark.parametrize("sscn", [True, False], ids=["tls-client", "tls-server"])
@pytest.mark.parametrize("peer", ["refuses", "closes"])
def test_a_handshake_failed_before_the_stor_is_the_stor_s_522(tmp_path, certs, sscn, peer):  # noqa: F811
    """The other end refuses the handshake or closes mid-handshake: NOOP
    still gets its own reply, the STOR gets 522 with the reason, and the
    STOR after it finds no data connection."""
    with tls_session(tmp_path, certs, sscn) as (ctl, address), socket.create_connection(address, timeout=20) as data:
        if peer == "refuses":
            refuse_handshake(data, sscn)
        else:
            data.shutdown(socket.SHUT_WR)
        with contextlib.suppress(ConnectionError):
            while data.recv(65536):  # till the server closes it: the handshake failed there
                pass
        assert ctl.cmd("NOOP").startswith("200")
        reply = ctl.cmd("STOR dst.bin")
        assert reply.startswith("522 SSL handshake failed on the data connection: "), reply
        why = {"refuses": "tls alert handshake failure" if sscn else "http request", "closes": "eof"}[peer]
        assert why in reply.lower(), reply
        assert ctl.cmd("STOR dst.bin").startswith("425 Can't open data connection: none is open")
        assert not (tmp_path / "root" / "dst.bin").exists()


@pytest.mark.parametrize("sscn", [True, False], ids=["tls-client", "tls-server"])
def test_a_handshake_failing_under_a_waiting_stor_answers_it_522_with_the_reason(tmp_path, certs, sscn):  # noqa: F811
    with tls_session(tmp_path, certs, sscn) as (ctl, address):
        assert ctl.cmd("STOR dst.bin").startswith("150")
        with socket.create_connection(address, timeout=20) as data:
            refuse_handshake(data, sscn)
            reply = ctl.reply()
        assert reply.startswith("522 SSL handshake failed on the data connection: "), reply
        assert ("tls alert handshake failure" if sscn else "http request") in reply, reply
        assert ctl.cmd("NOOP").startswith("200")
