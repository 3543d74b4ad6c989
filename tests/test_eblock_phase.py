"""drsftp/server/ftp/eblock/state.py: a MODE E session's phase moves by one
table of legal moves (docs/EBLOCK.md, "Session phases"); ESession's MODE,
transfer and QUIT follow it, and a move the table lacks raises."""

import itertools

import pytest

from drsftp.server.ftp.eblock.session import ESession
from drsftp.server.ftp.eblock.state import TRANSITIONS, Event, IllegalMove, Phase, SessionPhase
from drsftp.server.ftp.eblock.streams import Limits, StreamCount

P, E = Phase, Event
EXPECTED = {
    (P.STREAM, E.MODE_E): P.READY,
    (P.STREAM, E.MODE_S): P.STREAM,
    (P.READY, E.MODE_E): P.READY,
    (P.READY, E.MODE_S): P.STREAM,
    (P.READY, E.START): P.TRANSFER,
    (P.TRANSFER, E.END): P.READY,
    (P.TRANSFER, E.QUIT): P.QUITTING,
    (P.QUITTING, E.END): P.CLOSING,
}
ILLEGAL = sorted(set(itertools.product(Phase, Event)) - set(EXPECTED), key=lambda pe: (pe[0].value, pe[1].value))


def at(phase: Phase) -> SessionPhase:
    """A SessionPhase brought to ``phase`` by legal moves only."""
    path = {P.STREAM: [], P.READY: [E.MODE_E], P.TRANSFER: [E.MODE_E, E.START],
            P.QUITTING: [E.MODE_E, E.START, E.QUIT], P.CLOSING: [E.MODE_E, E.START, E.QUIT, E.END]}[phase]
    sp = SessionPhase()
    for event in path:
        sp.move(event)
    assert sp.now is phase
    return sp


def test_the_table_is_the_documented_one():
    assert TRANSITIONS == EXPECTED


@pytest.mark.parametrize(("phase", "event"), sorted(EXPECTED, key=lambda pe: (pe[0].value, pe[1].value)))
def test_every_legal_move_lands_where_the_table_says(phase, event):
    sp = at(phase)
    assert sp.move(event) is EXPECTED[(phase, event)]
    assert sp.now is EXPECTED[(phase, event)]


@pytest.mark.parametrize(("phase", "event"), ILLEGAL)
def test_a_move_the_table_lacks_raises_and_changes_nothing(phase, event):
    sp = at(phase)
    with pytest.raises(IllegalMove, match=f"{event.value} in phase {phase.value}"):
        sp.move(event)
    assert sp.now is phase


def test_no_transfer_outside_mode_e_none_during_one_and_nothing_after_quit():
    assert (P.STREAM, E.START) in ILLEGAL and (P.TRANSFER, E.START) in ILLEGAL
    assert (P.TRANSFER, E.MODE_S) in ILLEGAL and (P.TRANSFER, E.MODE_E) in ILLEGAL
    assert (P.READY, E.QUIT) in ILLEGAL and (P.READY, E.END) in ILLEGAL
    assert all((P.CLOSING, e) in ILLEGAL for e in Event)


def test_the_flags_read_off_the_phase():
    assert [at(p).extended for p in Phase] == [p is not P.STREAM for p in Phase]
    assert {p for p in Phase if at(p).running} == {P.TRANSFER, P.QUITTING}
    assert {p for p in Phase if at(p).quit_came} == {P.QUITTING, P.CLOSING}


# -- ESession follows the table ------------------------------------------------------
class FakeHandler:
    """What ESession's MODE, transfer end and QUIT touch of the control handler."""

    def __init__(self) -> None:
        self.eblock_limits = Limits()
        self.eblock_count = StreamCount()
        self.replies: list[str] = []
        self.later: list[str] = []  # what transfer_ended scheduled, by name
        self._idler = None
        self.timeout = 0
        self.ioloop = self

    def respond(self, line: str) -> None:
        self.replies.append(line)

    def call_later(self, _delay, fn, _errback=None) -> None:
        self.later.append(fn.__name__)

    def release_held(self) -> None: ...

    def drop_held(self) -> None: ...

    def after_replies(self, _then) -> bool:
        return False  # no batch of replies under way: the session schedules ``then`` itself

    def close_when_done(self) -> None: ...

    def handle_error(self) -> None: ...


class FakeJob:
    path = None  # a listing: no transfer log line


def test_a_session_moves_through_mode_a_transfer_and_quit():
    h = FakeHandler()
    s = ESession(h)
    assert not s.active and not s.busy
    assert s.mode("E") and h.replies == ["200 Mode set to E."]
    assert s.active and s.phase.now is P.READY
    job = FakeJob()
    s._started(job)
    assert s.busy and s.job is job
    s.quit_pending = True  # (EModeCommands.ftp_QUIT during a transfer)
    assert s.quit_pending and s.busy and s.phase.now is P.QUITTING
    s.job_ended(job, complete=True, failed=False)
    assert s.job is None and not s.busy and s.phase.now is P.CLOSING
    assert h.later == ["release_held", "close_when_done"]  # the commands that waited, then the close


def test_mode_s_leaves_extended_block_mode_and_a_plain_transfer_end_closes_nothing():
    h = FakeHandler()
    s = ESession(h)
    s.mode("E")
    job = FakeJob()
    s._started(job)
    s.job_ended(job, complete=False, failed=True)
    assert s.phase.now is P.READY and h.later == ["drop_held"]
    assert not s.mode("S") and not s.active  # (the stock handler answers MODE S)


def test_an_illegal_move_of_the_session_raises():
    s = ESession(FakeHandler())
    with pytest.raises(IllegalMove):
        s.quit_pending = True  # QUIT with no transfer running: the stock handler's, never the session's
    with pytest.raises(IllegalMove):
        s._started(FakeJob())  # a transfer outside MODE E
    assert s.job is None and s.phase.now is P.STREAM
    s.mode("E")
    s._started(FakeJob())
    with pytest.raises(IllegalMove):
        s.mode("S")  # MODE waits while a transfer runs (docs/EBLOCK.md, "Pipelined transfers")
    with pytest.raises(IllegalMove):
        s.quit_pending = False
    assert s.busy and s.active
