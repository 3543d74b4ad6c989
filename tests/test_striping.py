"""GridFTP's striping commands on `drsftp serve`, one stripe (GFD.20
5.1-5.2; drsftp/ftp/striping.py): FEAT's PARALLEL promises SPAS and SPOR.
SPAS is MODE E's PASV with its address on a continuation line, SPOR its
PORT with one address that passes PORT's rules; outside MODE E and after
EPSV ALL both are refused.  globus-url-copy -stripe against the server is
in test_third_party_interop.py, the grammar's unit tests in
test_ftp_proto.py."""

from __future__ import annotations

import socket

import pytest
from conftest import running_server
from test_eblock_server import SIZE, Ctl, Receiver, block, header, put_mode_e, root  # noqa: F401 (root: a fixture)

from drsftp.ftp.eblock import Desc
from drsftp.ftp.striping import host_port


def _spas(ctl, arg=""):
    code, text = ctl.cmd("SPAS" + arg)
    assert code == "229", text
    lines = text.split("\r\n")
    assert lines[0] == "229-Entering Striped Passive Mode." and lines[2] == "229 End", text
    assert lines[1].startswith(" |1|" if arg else " 127,"), text  # RFC 2428's form for a SPAS with net-prt
    return host_port(lines[1].strip())


def test_spas_and_spor_need_mode_e_and_are_refused_after_epsv_all(root):  # noqa: F811
    with running_server(root) as srv:
        ctl = Ctl(srv.port)
        assert ctl.cmd("SPAS")[0] == "503"
        assert ctl.cmd("SPOR 127,0,0,1,195,80")[0] == "503"
        assert ctl.cmd("MODE E")[0] == "200"
        assert ctl.cmd("EPSV ALL")[0].startswith("2")
        assert ctl.cmd("SPAS")[0] == "501"
        assert ctl.cmd("SPOR 127,0,0,1,195,80")[0] == "501"


@pytest.mark.parametrize("arg", ["", " 1", " 2"])  # GridFTP's client sends SPAS 2 where IPv6 is allowed
def test_a_stor_over_spas(root, arg):  # noqa: F811
    with running_server(root) as srv:
        ctl = Ctl(srv.port)
        assert ctl.cmd("MODE E")[0] == "200"
        assert ctl.cmd("SPAS 3")[0] == "501"
        addr = _spas(ctl, arg)
        assert addr[0] == "127.0.0.1"
        assert ctl.cmd("ALLO 8")[0] == "200"
        assert ctl.cmd("STOR striped.bin")[0] == "150"
        with socket.create_connection(addr, timeout=10) as s:
            s.sendall(block(0, b"stripe-0") + header(Desc.EOD | Desc.EOF, 0, 1))
            assert ctl.final()[0] == "226"
    assert (root / "striped.bin").read_bytes() == b"stripe-0"


@pytest.mark.parametrize("form", ["rfc959", "rfc2428"])
def test_a_retr_to_the_address_spor_named(root, form):  # noqa: F811
    data = (root / "big.bin").read_bytes()
    with running_server(root) as srv:
        ctl = Ctl(srv.port)
        rx = Receiver(SIZE)
        rx.gate.set()
        p = rx.lst.getsockname()[1]
        assert ctl.cmd("MODE E")[0] == "200"
        assert ctl.cmd("OPTS RETR Parallelism=2,2,2;")[0] == "200"
        address = f"127,0,0,1,{p >> 8},{p & 255}" if form == "rfc959" else f"|1|127.0.0.1|{p}|"
        assert ctl.cmd(f"SPOR {address}")[0] == "200"
        assert ctl.cmd("RETR big.bin")[0] == "150"
        rx.accept(2)
        assert ctl.final()[0] == "226"
        rx.join()
    assert rx.ledger.complete and rx.ledger.eod_count == 2
    assert bytes(rx.buf) == data


@pytest.mark.parametrize(("arg", "code"), [
    ("127,0,0,1,195,80 127,0,0,1,195,81", "504"),  # two stripes: this server is one
    ("127,0,0,1,195", "501"),
    ("|1|127.0.0.1|50000", "501"),
    ("|1|10.9.8.7|50000|", "501"),  # the RFC 2428 form passes the same rules
    ("|3|127.0.0.1|50000|", "522"),  # a network protocol RFC 2428 does not know
    ("10,9,8,7,200,1", "501"),  # another host, not listed (RFC 2577: no bounce)
    ("127,0,0,1,0,80", "501"),  # a privileged port
])
def test_spor_refusals(root, arg, code):  # noqa: F811
    with running_server(root) as srv:
        ctl = Ctl(srv.port)
        assert ctl.cmd("MODE E")[0] == "200"
        got, text = ctl.cmd(f"SPOR {arg}")
        assert got == code, text
        assert ctl.cmd("RETR big.bin")[0] == "425"  # no address was taken


def test_spas_on_an_ipv6_data_interface_names_it_in_rfc_2428_form_only(root):  # noqa: F811
    """A listener on ::1 behind an IPv4 masquerade address: PASV cannot
    name it (425, stream mode too), SPAS without net-prt neither (522),
    SPAS 2 names ::1 itself (the NAT's IPv4 address is not the listener's)."""
    with running_server(root, "--data-interface", "::1", "--masquerade-address", "127.0.0.5") as srv:
        ctl = Ctl(srv.port)
        assert ctl.cmd("PASV")[0] == "425"  # stream mode
        assert ctl.cmd("MODE E")[0] == "200"
        assert ctl.cmd("PASV")[0] == "425"
        assert ctl.cmd("SPAS")[0] == "522"
        assert ctl.cmd("SPAS 1")[0] == "522"
        code, text = ctl.cmd("SPAS 2")
        assert code == "229", text
        ip, port = host_port(text.split("\r\n")[1].strip())
        assert ip == "::1"
        socket.create_connection((ip, port), timeout=10).close()  # the listener is there
