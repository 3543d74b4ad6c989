"""drsftp/ftp/thirdparty.py: a third-party copy's commands to both servers
(docs/PROTOCOL.md, "Third-party transfers").  Expected values come from the
RFCs and the docs, written here, not read back from the module's constants
(docs/MUTATION.md: many of these tests pin a rule a mutation run found open)."""

import pytest

from drsftp.ftp.replies import Reply
from drsftp.ftp.thirdparty import CopyError, CopyFlow, CopySpec, Done, Failed, Phase, Side, port_argument, rest_argument

# -- third-party copies: the command sequence (docs/THIRDPARTY.md, "The command sequence") --

PASV_B = Reply(227, ("Entering Passive Mode (127,0,0,1,39,16).",))


def test_port_takes_an_ipv4_address_of_four_octets_and_a_port_of_1_to_65535():
    """RFC 959 4.1.2: h1,h2,h3,h4,p1,p2, each a decimal octet."""
    assert port_argument("255.255.255.255", 1) == "255,255,255,255,0,1"
    assert port_argument("0.0.0.0", 65535) == "0,0,0,0,255,255"
    for host, port in (("256.0.0.1", 21), ("1.2.3.256", 21), ("-1.0.0.1", 21), (" 1.0.0.1", 21),
                       ("1.0.0.1", 0), ("1.0.0.1", 65536)):
        with pytest.raises(ValueError, match="not an IPv4 address and port"):
            port_argument(host, port)


def test_rest_leaves_out_empty_ranges_and_none_left_is_no_rest():
    assert rest_argument(((0, 0),), False) is None and rest_argument(((0, 0), (5, 5)), True) is None
    assert rest_argument(((0, 5), (7, 7)), True) == "0-5"


def test_the_spec_takes_1_to_64_streams_default_1_and_stream_mode_one_prefix():
    """docs/PARALLEL.md: -P takes 1-64; the default, 1."""
    assert CopySpec("/f", "/g", streams=64).streams == 64
    with pytest.raises(ValueError, match="1-64"):
        CopySpec("/f", "/g", streams=65)
    flow = CopyFlow(CopySpec("/f", "/g", mode_e=True))
    assert "OPTS RETR Parallelism=1,1,1;" in [c.line for c in flow.opening()]
    with pytest.raises(ValueError, match="prefix"):
        CopySpec("/f", "/g", held=((0, 5), (7, 9)))


def test_a_pasv_reply_from_the_side_that_did_not_listen_is_an_error():
    flow = CopyFlow(CopySpec("/f", "/g"))
    flow.opening()
    with pytest.raises(CopyError, match="from the source was not expected"):
        flow.passive(Side.SOURCE, PASV_B)


def test_stream_mode_runs_once_both_transfer_commands_went_and_retr_goes_once():
    flow = CopyFlow(CopySpec("/f", "/g"))
    flow.opening()
    flow.passive(Side.DEST, PASV_B)
    assert flow.phase is Phase.OPENING  # B's STOR only: A's RETR waits for PORT's 200
    assert [c.line for c in flow.port_accepted()] == ["RETR /f"]
    assert flow.phase is Phase.RUNNING
    assert flow.port_accepted() == []  # (a second 200 sends nothing more)


@pytest.mark.parametrize("code", [200, 226, 250, 299])
def test_a_2yz_final_reply_completes(code):
    """RFC 959 sec. 4.2: 2yz is positive completion."""
    flow = CopyFlow(CopySpec("/f", "/g"))
    assert flow.final(Side.SOURCE, Reply(code, ("ok",))) is None
    assert isinstance(flow.final(Side.DEST, Reply(code, ("ok",))), Done)


@pytest.mark.parametrize("code", [199, 300, 350])
def test_a_final_reply_that_is_no_2yz_fails_the_copy(code):
    flow = CopyFlow(CopySpec("/f", "/g"))
    assert isinstance(flow.final(Side.DEST, Reply(code, ("no",))), Failed)
