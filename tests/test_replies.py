"""drsftp/ftp/replies.py: FTP replies read off the control connection (RFC 959
sec. 4.2; EPSV, RFC 2428; PASV).  Expected values come from the RFCs and the
docs, written here, not read back from the module's constants
(docs/MUTATION.md: many of these tests pin a rule a mutation run found open)."""

import pytest

from drsftp.ftp.replies import ProtocolError, Reply, ReplyParser, parse_epsv, parse_pasv

# -- FTP replies (RFC 959 sec. 4.2) --------------------------------------------

def test_reply_classes_by_first_digit():
    """1yz preliminary; 2yz and 3yz success so far; 4yz, 5yz failures."""
    for code, preliminary, ok in ((100, True, False), (199, True, False), (200, False, True),
                                  (399, False, True), (400, False, False)):
        r = Reply(code, ("x",))
        assert (r.preliminary, r.ok) == (preliminary, ok), code


def test_an_empty_line_is_no_reply():
    for empty in (b"\r\n", b"\n"):  # a bare LF ends a line too
        with pytest.raises(ProtocolError):
            ReplyParser().feed(empty)


def test_line_limit_is_8_kib_inclusive():
    """docs/PROTOCOL.md: a reply line over 8192 bytes is a broken or hostile peer."""
    ok = b"200 " + b"x" * (8192 - 4)
    assert ReplyParser().feed(ok + b"\r\n")[0].code == 200
    with pytest.raises(ProtocolError):
        ReplyParser().feed(ok + b"x\r\n")
    p = ReplyParser()
    assert p.feed(ok) == []  # not yet a line: waits for more
    with pytest.raises(ProtocolError):
        p.feed(b"x")


def test_multiline_limit_is_1000_lines():
    body = b"".join(b" line\r\n" for _ in range(999))
    (r,) = ReplyParser().feed(b"211-first\r\n" + body + b"211 end\r\n")
    assert len(r.lines) == 1001
    with pytest.raises(ProtocolError):
        ReplyParser().feed(b"211-first\r\n" + body + b" one more\r\n")


def test_epsv_ports_1_to_65535():
    """RFC 2428 sec. 3: a TCP port (RFC 9293: 16 bits; 0 is no port)."""
    assert parse_epsv(Reply(229, ("Entering Extended Passive Mode (|||1|)",))) == 1
    assert parse_epsv(Reply(229, ("Entering Extended Passive Mode (|||65535|)",))) == 65535
    for port in (0, 65536):
        with pytest.raises(ProtocolError):
            parse_epsv(Reply(229, (f"Entering Extended Passive Mode (|||{port}|)",)))


def test_pasv_needs_227_and_bytes_up_to_255():
    assert parse_pasv(Reply(227, ("Entering Passive Mode (255,0,0,1,255,255)",))) == ("255.0.0.1", 65535)
    with pytest.raises(ProtocolError):
        parse_pasv(Reply(200, ("Entering Passive Mode (127,0,0,1,4,1)",)))
    with pytest.raises(ProtocolError):
        parse_pasv(Reply(227, ("Entering Passive Mode (127,0,0,1,256,1)",)))
