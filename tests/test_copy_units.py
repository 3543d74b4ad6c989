"""The sans-IO parts of `drsftp copy` (docs/THIRDPARTY.md): the command
sequence of one file between two servers (drsftp/ftp/thirdparty.py), the
relayed DRS (drsftp/ftp/relay.py) and -P auto from the data path
(drsftp/tuning/count/pathstreams.py)."""

from __future__ import annotations

import pytest

from drsftp.ftp.drsexchange import MIN_INTERVAL
from drsftp.ftp.relay import Relay
from drsftp.ftp.replies import Reply
from drsftp.ftp.thirdparty import (
    CopyError,
    CopyFlow,
    CopySpec,
    Done,
    Failed,
    Side,
    port_argument,
    rest_argument,
)
from drsftp.tuning.count.pathstreams import PathStreams
from drsftp.tuning.count.streams import StreamsConfig, first_streams

A, B = Side.SOURCE, Side.DEST
PASV_B = Reply(227, ("Entering Passive Mode (127,0,0,1,39,16).",))
PASV_A = Reply(227, ("Entering Passive Mode (10,0,0,2,4,1).",))
OK226 = Reply(226, ("Transfer complete.",))


def lines(cmds):
    return [(c.side, c.line) for c in cmds]


# -- the command sequence ------------------------------------------------------------

def test_stream_mode_b_listens_a_connects_and_retr_waits_for_port():
    flow = CopyFlow(CopySpec("/src/f", "/dst/g", size=1000))
    assert lines(flow.opening()) == [(B, "PASV")]
    assert lines(flow.passive(B, PASV_B)) == [(A, "PORT 127,0,0,1,39,16"), (B, "ALLO 1000"), (B, "STOR /dst/g")]
    # pyftpdlib answers PORT once connected: a RETR before that reply gets its 150 first
    assert lines(flow.port_accepted()) == [(A, "RETR /src/f")]
    assert flow.final(A, OK226) is None
    done = flow.final(B, OK226)
    assert isinstance(done, Done) and set(done.replies) == {A, B}


def test_extended_block_mode_parallelism_ranges_and_everything_at_the_address():
    spec = CopySpec("/f", "/g", size=10 << 20, mode_e=True, streams=4, held=((0, 1 << 20), (2 << 20, 3 << 20)))
    flow = CopyFlow(spec)
    assert lines(flow.opening()) == [(B, "MODE E"), (A, "MODE E"), (A, "OPTS RETR Parallelism=4,4,4;"),
                                     (B, "PASV")]
    rest = "REST 0-1048576,2097152-3145728"
    assert lines(flow.passive(B, PASV_B)) == [(A, "PORT 127,0,0,1,39,16"), (B, f"ALLO {10 << 20}"), (B, rest),
                                              (B, "STOR /g"), (A, rest), (A, "RETR /f")]
    assert flow.port_accepted() == []  # (MODE E: the sender connects at RETR, drsftp serve answers PORT at once)


def test_cached_streams_need_no_address():
    flow = CopyFlow(CopySpec("/f", "/g", size=5, mode_e=True, streams=2, cached=True))
    assert lines(flow.opening()) == [(B, "ALLO 5"), (B, "STOR /g"), (A, "RETR /f")]


def test_stream_mode_resumes_at_the_prefix_on_both():
    flow = CopyFlow(CopySpec("/f", "/g", size=100, held=((0, 40),)))
    flow.opening()
    assert lines(flow.passive(B, PASV_B))[1:] == [(B, "ALLO 100"), (B, "REST 40"), (B, "STOR /g")]
    assert lines(flow.port_accepted()) == [(A, "REST 40"), (A, "RETR /f")]


def test_a_destination_refusing_pasv_reverses_the_direction_in_stream_mode():
    flow = CopyFlow(CopySpec("/f", "/g"))
    flow.opening()
    assert lines(flow.passive(B, Reply(502, ("PASV not implemented.",)))) == [(A, "PASV")]
    assert flow.active_side is B
    assert lines(flow.passive(A, PASV_A)) == [(B, "PORT 10,0,0,2,4,1"), (A, "RETR /f")]
    assert lines(flow.port_accepted()) == [(B, "STOR /g")]


def test_extended_block_mode_cannot_reverse():
    flow = CopyFlow(CopySpec("/f", "/g", mode_e=True, streams=2))
    flow.opening()
    with pytest.raises(CopyError, match="source connects"):
        flow.passive(B, Reply(502, ("no.",)))


def test_a_pasv_reply_without_an_address_is_an_error():
    flow = CopyFlow(CopySpec("/f", "/g"))
    flow.opening()
    with pytest.raises(CopyError, match="no IPv4 address"):
        flow.passive(B, Reply(227, ("Entering Passive Mode (nothing).",)))


def test_a_refusal_from_either_side_fails_it_and_aborts_the_other():
    flow = CopyFlow(CopySpec("/f", "/g"), names={A: "the source a:1", B: "the destination b:2"})
    flow.opening()
    flow.passive(B, PASV_B)
    flow.port_accepted()
    failed = flow.final(B, Reply(553, ("Could not create file.",)))
    assert isinstance(failed, Failed) and failed.side is B and failed.abort == (A,)
    assert failed.reason == "STOR /g failed on the destination b:2: 553 Could not create file."
    assert flow.final(A, Reply(426, ("aborted",))) is None  # (ended: nothing more)


def test_a_lost_source_aborts_the_destination_but_not_a_transfer_never_sent():
    flow = CopyFlow(CopySpec("/f", "/g"))
    flow.opening()
    flow.passive(B, PASV_B)  # B's STOR is out, A's RETR not yet
    failed = flow.lost(A, "closed")
    assert failed.abort == (B,) and failed.reply is None
    flow2 = CopyFlow(CopySpec("/f", "/g"))
    flow2.opening()
    assert flow2.lost(B, "closed").abort == ()


def test_a_refused_step_fails_it():
    flow = CopyFlow(CopySpec("/f", "/g"))
    flow.opening()
    port = flow.passive(B, PASV_B)[0]
    failed = flow.refused(port, Reply(501, ("Rejected data connection to foreign address.",)))
    assert failed.abort == (B,) and "active mode (PORT) on the source failed: 501" in failed.reason


def test_the_spec_keeps_stream_mode_to_a_prefix():
    with pytest.raises(ValueError):
        CopySpec("/f", "/g", held=((10, 20),))
    with pytest.raises(ValueError):
        CopySpec("/f", "/g", cached=True)
    with pytest.raises(ValueError):
        CopySpec("/f", "/g", mode_e=True, streams=65)


def test_port_and_rest_arguments():
    assert port_argument("192.168.1.2", 0x1234) == "192,168,1,2,18,52"
    with pytest.raises(ValueError):
        port_argument("::1", 21)
    assert rest_argument((), False) is None
    assert rest_argument(((0, 7),), False) == "7"
    assert rest_argument(((0, 7), (9, 12)), True) == "0-7,9-12"


# -- relayed DRS ------------------------------------------------------------------------

def _reply(pairs):
    return " ".join(["DRS"] + [f"{k}={v}" for k, v in pairs.items()])


def test_relay_sends_bare_drs_first_then_the_others_pairs_without_streams():
    relay = Relay(True, True)
    assert relay.command(A) == "DRS" and relay.command(B) == "DRS"
    relay.sent(A, 0.0, "DRS")
    relay.sent(B, 0.0, "DRS")
    relay.on_reply(A, 0.01, 200, _reply({"rtt_us": 40000, "cwnd": 900000, "streams": 4, "bytes": 10}))
    relay.on_reply(B, 0.01, 200, _reply({"rtt_us": 41000, "wnd": 2000000, "bytes": 8, "streams": 4}))
    assert relay.command(A) == "DRS rtt_us=41000 wnd=2000000 bytes=8"  # streams= would be a request to A
    assert relay.command(B) == "DRS rtt_us=40000 cwnd=900000 bytes=10"
    relay.wanted_streams = 2
    assert relay.command(A).endswith(" streams=2") and relay.wanted_streams is None


def test_relay_paces_by_the_data_paths_rtt_from_the_senders_report():
    relay = Relay(True, True)
    assert relay.data_rtt() is None and relay.due(A, 0.0)
    relay.sent(A, 0.0, "DRS")
    assert not relay.due(A, 1.0)  # one outstanding
    relay.on_reply(A, 0.002, 200, _reply({"rtt_us": 200000}))
    relay.on_reply(B, 0.002, 200, _reply({"rtt_us": 900000}))
    assert relay.data_rtt() == 0.2  # the sender's own RTT, not the receiver's estimate
    assert not relay.due(A, 0.19) and relay.due(A, 0.2)
    fast = Relay(True, True)
    fast.sent(A, 0.0, "DRS")
    fast.on_reply(A, 0.0, 200, _reply({"rtt_us": 100}))
    assert not fast.due(A, MIN_INTERVAL / 2) and fast.due(A, MIN_INTERVAL)


def test_a_server_refusing_drs_leaves_the_other_with_bare_drs_and_the_record():
    relay = Relay(True, True)
    relay.sent(A, 0.0, "DRS")
    relay.sent(B, 0.0, "DRS")
    relay.on_reply(A, 0.1, 200, _reply({"rtt_us": 5000, "rate": 100, "bytes": 50}))
    relay.on_reply(B, 0.1, 500, "Command DRS not understood.")
    assert not relay.relaying and not relay.exchanges[B].enabled
    assert relay.command(A) == "DRS"
    assert relay.record() == {"source": [{"t": 0.1, "rtt_us": 5000, "rate": 100, "bytes": 50}], "destination": []}
    assert relay.moved() == 50  # (A's acknowledged bytes, B reporting none)


def test_progress_counts_from_the_destinations_base():
    relay = Relay(True, True)
    relay.bytes_base = 1000  # streams kept from an earlier file
    relay.on_reply(B, 0.0, 200, _reply({"bytes": 1500}))
    assert relay.moved() == 500 and relay.moved(limit=100) == 100


# -- -P auto from the data path ----------------------------------------------------------

def test_first_streams_wait_for_the_data_paths_rtt_then_follow_it():
    cap = 4 << 20
    auto = PathStreams(StreamsConfig(max_streams=16), cap)
    assert auto.streams == 4
    assert auto.update(0.0, None, 0, 0) is None  # no report yet: nothing from anywhere else
    n = auto.update(0.1, 0.1, 0, 0)
    assert n == first_streams(0.1, cap, StreamsConfig(max_streams=16)) == 8 and auto.first_rtt == 0.1
    lan = PathStreams(StreamsConfig(max_streams=16), cap)
    assert lan.update(0.1, 0.0002, 0, 0) == 1


def test_after_the_first_the_controller_judges_the_reported_goodput():
    auto = PathStreams(StreamsConfig(max_streams=16), 4 << 20)
    auto.update(0.0, 0.05, 0, 0)
    n0 = auto.streams
    decisions = []
    moved = 0
    for i in range(1, 40):  # goodput growing with every stream: it keeps probing upward
        moved += int(1e6 * auto.streams)
        decisions.append(auto.update(i * 0.25, 0.05, moved, 0, left=10 ** 12))
    assert auto.streams > n0 and any(d is not None for d in decisions)


class _RefusingControl:
    """A control connection whose server knows no SSCN (GridFTP, vsftpd)."""

    def __init__(self) -> None:
        self.sent: list[str] = []

    async def command(self, line: str) -> Reply:
        self.sent.append(line)
        return Reply(500, ("Unknown command.",))


def test_a_source_without_sscn_stops_a_private_copy_in_one_sentence():
    import asyncio

    from drsftp.client.session.control import FTPError
    from drsftp.client.thirdparty.pair import client_side_tls

    ctl = _RefusingControl()
    with pytest.raises(FTPError) as err:
        asyncio.run(client_side_tls(ctl, "the source ftp://a/"))
    text = str(err.value)
    assert ctl.sent == ["SSCN ON"]
    assert "does not take SSCN" in text and "--tls-data clear" in text and "\n" not in text
