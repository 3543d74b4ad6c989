"""Sans-IO FTP pieces: replies, FEAT/EPSV/PASV, reply routing, URLs, DRS grammar."""


import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from drsftp.client.session.credentials import locate
from drsftp.ftp import drscmd
from drsftp.ftp.replies import (
    ProtocolError,
    Reply,
    ReplyParser,
    parse_epsv,
    parse_feat,
    parse_pasv,
)
from drsftp.ftp.routing import ReplyRouter
from drsftp.ftp.striping import UnknownNetwork, host_port, spas_net_prt, spas_reply, spor_addresses
from drsftp.ftp.url import URLError, parse_url

FEAT = (b"211-Features supported:\r\n DRS\r\n EPSV\r\n MLST type*;size*;\r\n"
        b" REST STREAM\r\n SIZE\r\n211 End FEAT.\r\n")


def test_single_and_multiline_replies():
    p = ReplyParser()
    out = p.feed(b"220 hello\r\n" + FEAT + b"226 Transfer complete.\r\n")
    assert [r.code for r in out] == [220, 211, 226]
    assert parse_feat(out[1]) == {"DRS", "EPSV", "MLST", "REST", "SIZE"}
    assert out[2].first == "Transfer complete."


def test_multiline_with_embedded_code_lines_per_rfc959():
    # RFC 959 4.2: inner lines may begin with digits; only "ddd " closes
    p = ReplyParser()
    (r,) = p.feed(b"123-First line\r\n234 not the end\r\n123-still\r\n123 The last line\r\n")
    assert r.code == 123 and len(r.lines) == 4


def test_garbage_and_overlong_lines_are_protocol_errors():
    with pytest.raises(ProtocolError):
        ReplyParser().feed(b"hello there\r\n")
    with pytest.raises(ProtocolError):
        ReplyParser().feed(b"220 " + b"x" * 10000)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(1, 40), min_size=1, max_size=80))
def test_property_any_chunking_gives_same_replies(cuts):
    data = b"220 hi\r\n" + FEAT + b"150 ok\r\n200 DRS rtt_us=100 cwnd=5\r\n226 done\r\n"
    expected = ReplyParser().feed(data)
    p, got, pos = ReplyParser(), [], 0
    for c in cuts:
        got += p.feed(data[pos:pos + c])
        pos += c
    got += p.feed(data[pos:])
    assert got == expected


def test_epsv_and_pasv():
    assert parse_epsv(Reply(229, ("Entering extended passive mode (|||50123|).",))) == 50123
    assert parse_pasv(Reply(227, ("Entering passive mode (10,0,0,1,195,80).",))) == ("10.0.0.1", 50000)
    for bad in (Reply(229, ("(|||99999|)",)), Reply(200, ("(|||5|)",))):
        with pytest.raises(ProtocolError):
            parse_epsv(bad)
    with pytest.raises(ProtocolError):
        parse_pasv(Reply(227, ("(300,0,0,1,1,1)",)))


def test_router_keeps_drs_reply_apart_from_transfer_end():
    """The transfer's 226 and the DRS reply may come in either order."""
    for order in ("drs-first", "226-first"):
        r = ReplyRouter()
        r.sent("RETR", "retr")
        assert r.route(Reply(150, ("Opening",))) == ("retr", False)
        r.sent("DRS", "drs")
        replies = [Reply(200, ("DRS rtt_us=1",)), Reply(226, ("Transfer complete.",))]
        if order == "226-first":
            replies.reverse()
        routed = {reply.code: r.route(reply) for reply in replies}
        assert routed[200] == ("drs", True)
        assert routed[226] == ("retr", True)
        assert r.pending == 0


def test_router_handles_drs_errors_and_stock_500():
    r = ReplyRouter()
    r.sent("RETR", "retr")
    r.route(Reply(150, ("ok",)))
    r.sent("DRS", "drs")
    assert r.route(Reply(501, ("DRS bad pair",))) == ("drs", True)
    r.route(Reply(226, ("done",)))
    r.sent("DRS", "drs2")  # a stock server: no mark on its 500
    assert r.route(Reply(500, ('Command "DRS" not understood.',))) == ("drs2", True)
    assert r.route(Reply(421, ("bye",))) is None


def test_urls_and_netrc(tmp_path):
    loc = parse_url("ftp://bob:s%40cret@example.test:2121/dir/file%20x.bin")
    assert (loc.user, loc.password, loc.host, loc.port, loc.path) == (
        "bob", "s@cret", "example.test", 2121, "/dir/file x.bin")
    netrc = tmp_path / "netrc"
    netrc.write_text("machine example.test login carol password pw1\n")
    loc = locate("ftp://example.test/f", str(netrc))
    assert (loc.user, loc.password, loc.port) == ("carol", "pw1", 21)
    assert parse_url("ftp://h/f").user == "anonymous"  # the sans-IO parser reads no file
    assert parse_url("ftp://h/f", lambda host: ("dan", None, "pw2")).password == "pw2"
    with pytest.raises(URLError, match="no such file"):  # named and missing: not anonymous
        locate("ftp://h/f", str(tmp_path / "none"))
    for bad in ("http://h/f", "ftp:///f", "ftp://h/", "ftp://h:99999/f", "ftp://h:0/f",
                # a line break would end the command and send the rest as one of its own
                "ftp://h/f%0d%0aDELE%20x", "ftp://h/f%0aDELE%20x", "ftp://u:p%0d%0aDELE%20x@h/f",
                "ftp://u%0a:p@h/f", "ftp://h/f%00"):
        with pytest.raises(URLError):
            parse_url(bad)
    for url, secret in (("ftp://bob:s@cr3t@h:0/f", "cr3t"), ("ftp://bob:ab/cd@h/f", "cd")):
        with pytest.raises(URLError) as err:  # (errors echo the URL, never its password)
            parse_url(url)
        assert secret not in str(err.value) and "bob:***@h" in str(err.value), err.value
    assert locate("ftp://h/f", "/dev/null").user == "anonymous"  # (no netrc, said so)


def test_drs_grammar_roundtrip_and_limits():
    pairs = drscmd.parse_args("rtt_us=100000 cwnd=1048576 wnd=2097152 rate=12500000 bytes=5 future_key=3")
    report = drscmd.to_report(pairs)
    assert report.rtt == pytest.approx(0.1) and report.cwnd == 1 << 20 and report.window == 2 << 20
    assert pairs["future_key"] == 3  # unknown keys tolerated (forward compatible)
    text = "DRS " + drscmd.format_pairs({"rtt_us": 5000, "cwnd": None, "wnd": 10})
    assert drscmd.parse_reply_text(text) == {"rtt_us": 5000, "wnd": 10}
    assert drscmd.parse_reply_text("Transfer complete.") == {}
    assert drscmd.parse_args("") == {}
    for bad in ("RTT=5", "rtt_us=5.5", "a=b", "=5", "cwnd=" + "9" * 30, "wnd=17179869185"):
        with pytest.raises(drscmd.DRSArgumentError):
            drscmd.parse_args(bad)


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=300))
def test_property_drs_parser_never_crashes(text):
    try:
        pairs = drscmd.parse_args(text)
    except drscmd.DRSArgumentError:
        return
    drscmd.to_report(pairs)
    assert len(pairs) <= drscmd.MAX_PAIRS


# -- GFD.20 5.1-5.2: SPAS/SPOR, one stripe ---------------------------------------------


def test_host_port_reads_rfc_959_fields():
    assert host_port("127,0,0,2,195,80") == ("127.0.0.2", 50000)
    assert host_port("0,0,0,0,0,0") == ("0.0.0.0", 0)
    assert host_port("255,255,255,255,255,255") == ("255.255.255.255", 65535)
    # a bad field quoted, 60 characters at most
    with pytest.raises(ValueError, match=r"^not h1,h2,h3,h4,p1,p2 nor \|net-prt\|address\|port\|: '9{60}'$"):
        host_port("9" * 61)
    with pytest.raises(ValueError):
        host_port("\u0661\u0662\u0667,0,0,1,1,1")  # Arabic-Indic digits are digits to isdigit(), not to RFC 959


def test_host_port_reads_rfc_2428_fields():
    assert host_port("|1|192.0.2.7|50000|") == ("192.0.2.7", 50000)
    assert host_port("!2!2001:db8::7!65535!") == ("2001:db8::7", 65535)
    assert host_port("|1|192.0.2.7|1|") == ("192.0.2.7", 1)
    assert host_port("~1~192.0.2.7~5~") == ("192.0.2.7", 5)  # any delimiter in 33-126 (RFC 2428 sec. 2)
    assert host_port("!1!192.0.2.7!5!") == ("192.0.2.7", 5)
    with pytest.raises(ValueError, match=r"^not \|net-prt\|address\|port\|: '\|1\|9{57}'$"):
        host_port("|1|" + "9" * 70)
    with pytest.raises(ValueError, match=r"^not an IP address: 'x{60}'$"):
        host_port("|1|" + "x" * 70 + "|5|")
    assert host_port("|2|::ffff:192.0.2.7|5|") == ("192.0.2.7", 5)  # IPv4-mapped: the IPv4 address
    with pytest.raises(UnknownNetwork, match=r"^network protocol '9{8}' not supported"):  # quoted, 8 at most
        host_port("|" + "9" * 20 + "|192.0.2.7|50000|")
    for prt in ("3", "0", "", "11"):
        with pytest.raises(UnknownNetwork, match="not supported, use \\(1,2\\)"):
            host_port(f"|{prt}|192.0.2.7|50000|")
    for bad in ("|1|2001:db8::7|50000|", "|2|192.0.2.7|50000|", "|2|fe80::1%lo|50000|", "|1|192.0.2.7|0|",
                "|1|192.0.2.7|65536|", "|1|192.0.2.7|50000", "|1|192.0.2.7|50000||", "|1|host|50000|",
                "\x7f1\x7f192.0.2.7\x7f5\x7f", "|1|192.0.2.7|\u0665|"):
        with pytest.raises(ValueError):
            host_port(bad)
    with pytest.raises(ValueError, match=r"^not \|net-prt\|address\|port\|: '\|1\|192.0.2.7\|9{47}'$"):
        host_port("|1|192.0.2.7|" + "9" * 70 + "|")


def test_spas_takes_no_argument_or_a_network_protocol():
    assert [spas_net_prt(a) for a in ("", " ", "1", "2", " 2 ", "3", "0", "x", "12")] == \
        [True, True, True, True, True, False, False, False, False]
    for bad in ("127,0,0,1,195", "127,0,0,1,195,80,1", "256,0,0,1,1,1", "127,0,0,1,1,256", "a,b,c,d,e,f",
                "127,0,0,1,-1,5", "127,0,0,1,0001,5", ""):
        with pytest.raises(ValueError):
            host_port(bad)


def test_spor_takes_addresses_separated_by_spaces():
    assert spor_addresses(" 10,0,0,1,4,1  10,0,0,2,4,2 ") == [("10.0.0.1", 1025), ("10.0.0.2", 1026)]
    assert spor_addresses("|1|10.0.0.1|1025| 10,0,0,2,4,2") == [("10.0.0.1", 1025), ("10.0.0.2", 1026)]
    for bad in ("", "   ", "10,0,0,1,4,1 x"):
        with pytest.raises(ValueError):
            spor_addresses(bad)


def test_spas_reply_names_one_stripe_on_a_continuation_line():
    head = "229-Entering Striped Passive Mode.\r\n "
    assert spas_reply("192.0.2.7", 50000, False) == head + "192,0,2,7,195,80\r\n229 End"
    assert spas_reply("192.0.2.7", 50000, True) == head + "|1|192.0.2.7|50000|\r\n229 End"  # SPAS 1 or SPAS 2
    assert spas_reply("2001:db8::7", 50000, True) == head + "|2|2001:db8::7|50000|\r\n229 End"
