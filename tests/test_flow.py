"""drsftp/ftp/flow.py: the client's command/reply state machine (RFC 959 sec.
5.4's sequences, docs/PARALLEL.md "The command sequence as a state machine").
Expected values come from the RFCs and the docs, written here, not read back
from the module's constants (docs/MUTATION.md: many of these tests pin a rule
a mutation run found open)."""

import dataclasses

import pytest

from drsftp.ftp.flow import (
    Accepted,
    FlowError,
    Marker,
    Refused,
    State,
    TransferDone,
    TransferEnded,
    TransferFlow,
    TransferStarted,
)
from drsftp.ftp.replies import Reply

# -- the transfer flow (RFC 959 4.2 and 5.4; RFC 2389, 2428, 3659; docs/PROTOCOL.md) ----

def _reply(code):
    return Reply(code, ("x",))


def _flow_in(state):
    f = TransferFlow()
    if state in (State.DATA_SET, State.TRANSFER):
        f.send("PASV")
        f.receive("PASV", _reply(227))
    if state is State.TRANSFER:
        f.send("RETR /f")
        f.receive("RETR", _reply(150))
    return f


# each verb's positive completion, by the RFC that defines the verb
POSITIVE_BY_RFC = [
    (State.READY, "TYPE I", 200), (State.READY, "MODE E", 200), (State.READY, "OPTS RETR Parallelism=2,2,2;", 200),
    (State.READY, "ALLO 10", 200), (State.READY, "ALLO 10", 202),  # 202: superfluous at this site
    (State.READY, "PORT 127,0,0,1,4,1", 200), (State.READY, "EPRT |1|127.0.0.1|1025|", 200),
    (State.READY, "PASV", 227), (State.READY, "EPSV", 229), (State.DATA_SET, "REST 100", 350),
    (State.READY, "SIZE /f", 213), (State.READY, "MDTM /f", 213), (State.READY, "FEAT", 211),
    (State.READY, "NOOP", 200), (State.READY, "HASH /f", 213), (State.READY, "CKSM MD5 0 -1 /f", 213),
    (State.TRANSFER, "DRS rate=1", 200), (State.TRANSFER, "ABOR", 225), (State.TRANSFER, "ABOR", 226),
    (State.DATA_SET, "RETR /f", 226), (State.DATA_SET, "RETR /f", 250),
    (State.DATA_SET, "STOR /f", 226), (State.DATA_SET, "STOR /f", 250),
]


@pytest.mark.parametrize("state, line, code", POSITIVE_BY_RFC)
def test_each_verbs_positive_completion_is_accepted_and_502_refused(state, line, code):
    verb = line.split()[0]
    f = _flow_in(state)
    f.send(line)
    assert isinstance(f.receive(verb, _reply(code)), TransferDone if verb in ("RETR", "STOR") else Accepted)
    f = _flow_in(state)
    f.send(line)
    assert isinstance(f.receive(verb, _reply(502)), Refused)  # 502: command not implemented


@pytest.mark.parametrize("first", [226, 250])
def test_a_transfer_completes_with_226_or_250_after_its_150(first):
    for verb in ("RETR", "STOR"):
        f = _flow_in(State.DATA_SET)
        f.send(f"{verb} /f")
        assert isinstance(f.receive(verb, _reply(150)), TransferStarted)
        assert isinstance(f.receive(verb, _reply(first)), TransferDone) and f.state is State.READY


@pytest.mark.parametrize("event", [Accepted("NOOP", _reply(200)), Refused("NOOP", _reply(500)),
                                   TransferStarted(_reply(150)), Marker(_reply(111)),
                                   TransferDone(_reply(226)), TransferEnded(_reply(426))])
def test_flow_events_are_values_no_consumer_can_change(event):
    with pytest.raises(dataclasses.FrozenInstanceError):
        event.reply = _reply(999)


def test_out_of_band_replies_pass_while_a_transfer_waits_but_in_band_ones_keep_command_order():
    f = _flow_in(State.TRANSFER)
    assert list(f.in_flight) == ["RETR"]
    f.send("DRS rate=1")
    assert isinstance(f.receive("DRS", _reply(200)), Accepted)  # routed by mark, not by order
    f2 = _flow_in(State.READY)
    f2.send("TYPE I")
    f2.send("PASV")
    with pytest.raises(FlowError, match="reply to PASV while TYPE waits"):
        f2.receive("PASV", _reply(227))


@pytest.mark.parametrize("code, starts", [(125, True), (150, True), (110, False), (120, False)])
def test_only_125_and_150_start_a_transfer(code, starts):
    """RFC 959 5.4: RETR and STOR open with 125 (connection open) or 150
    (about to open); other 1yz replies are not that start."""
    f = _flow_in(State.DATA_SET)
    f.send("RETR /f")
    assert isinstance(f.receive("RETR", _reply(code)), TransferStarted) is starts
    assert (f.state is State.TRANSFER) is starts
