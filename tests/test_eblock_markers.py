"""A MODE E STOR's last 111/112 markers paced per session
(docs/decisions/0041): the first small file of a session gets them before
its 226, the next ones within 2 s do not, a failed one always does; and a
batch of pipelined commands on cached streams is answered in order."""

from __future__ import annotations

from conftest import running_server
from test_eblock_server import Ctl, block, put_mode_e, stream

from drsftp.ftp.eblock import Desc, header


def _eof() -> bytes:
    return header(Desc.EOD | Desc.EOF, 0, 1)  # EOF: one EOD in all


def test_markers_before_a_226_paced_per_session(tmp_path):
    with running_server(tmp_path) as srv:
        ctl = Ctl(srv.port)
        port = put_mode_e(ctl, "a", allo=3)
        s = stream(port)
        s.sendall(block(0, b"abc") + _eof())
        code, text, seen = ctl.final()
        assert code == "226", text
        assert any(m.startswith("111 Range Marker 0-3") for m in seen), seen  # the session's first
        # the next small files on the cached stream, pipelined and answered
        # together: at most one of them with markers (none unless 2 s passed)
        s.sendall(block(0, b"defg") + _eof() + block(0, b"hi") + _eof())
        ctl.sock.sendall(b"ALLO 4\r\nSTOR b\r\nALLO 2\r\nSTOR c\r\nNOOP\r\n")
        marked = []
        for _ in "bc":
            assert ctl.reply()[0] == "200"
            code, text, seen = ctl.final()
            assert code == "226" and seen[0][:3] == "125", (text, seen)
            marked.append(any(m.startswith("111") for m in seen))
        assert marked.count(True) <= 1, marked
        assert ctl.reply()[0] == "200"  # NOOP: after them, in order
        # a STOR that ends short of its ALLO gets its markers (what REST may resume)
        ctl.sock.sendall(b"ALLO 10\r\nSTOR d\r\n")
        s.sendall(block(0, b"xyz") + _eof())
        assert ctl.reply()[0] == "200"
        code, text, seen = ctl.final()
        assert code == "451", text
        assert any(m.startswith("111 Range Marker 0-3") for m in seen), seen
        s.close()
        ctl.sock.close()
    assert [(tmp_path / n).read_bytes() for n in "abc"] == [b"abc", b"defg", b"hi"]
    assert not (tmp_path / "d").exists()
