"""drsftp/server/ftp/waiting.py: the waiting commands' queue and its gate
(the commands' own order on a live server: test_eblock_pipelined.py,
test_port_pipelined.py, test_login_refused.py)."""

import pytest

from drsftp.server.ftp.waiting import MAX_HELD, TRANSITIONS, CommandQueue, Gate, GateError


def test_a_pass_refused_while_the_waiting_commands_run_holds_the_rest_until_its_reply():
    q = CommandQueue()
    for event, gate in [("release", Gate.RELEASING), ("pass refused", Gate.REFUSED_PASS),
                        ("released", Gate.REFUSED_PASS), ("pass answered", Gate.OPEN),
                        ("release", Gate.RELEASING), ("released", Gate.OPEN)]:
        q.move(event)
        assert q.gate is gate, event


@pytest.mark.parametrize("gate", list(Gate))
@pytest.mark.parametrize("event", sorted({e for _g, e in TRANSITIONS}))
def test_a_move_off_the_table_is_refused_and_leaves_the_gate(gate, event):
    q = CommandQueue()
    q.gate = gate
    if (gate, event) in TRANSITIONS:
        q.move(event)
        assert q.gate is TRANSITIONS[(gate, event)]
    else:
        with pytest.raises(GateError, match=repr(event)):
            q.move(event)
        assert q.gate is gate


def test_the_queue_keeps_order_and_its_bound():
    q = CommandQueue()
    assert not q
    for i in range(MAX_HELD):
        assert q.hold(f"NOOP {i}", "NOOP" if i % 2 else "RETR", str(i))
    assert not q.hold("SIZE x", "SIZE", "x")  # past the bound: not queued
    assert len(q) == MAX_HELD
    assert q.next() == ("NOOP 0", "RETR", "0")
    assert q.drop()[:3] == ["NOOP", "RETR", "NOOP"]
    assert not q and q.drop() == []
