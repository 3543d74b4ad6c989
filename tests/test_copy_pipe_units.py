"""A copy tree's files pipelined on one pair of sessions, sans I/O
(drsftp/ftp/copypipe.py; docs/THIRDPARTY.md, "Trees"): the open, A's
RETRs ahead, B's STORs after A's starts and one at a time, a RETR refused
alone, every other failure breaking the streams (ABOR, the later files
back, new streams)."""

from __future__ import annotations

import pytest

from drsftp.ftp.copypipe import FileBack, FileDone, FileFailed, PipeFlow, Stage, State
from drsftp.ftp.replies import Reply
from drsftp.ftp.thirdparty import Side

A, B = Side.SOURCE, Side.DEST


def R(code: int, text: str = "x") -> Reply:
    return Reply(code, (text,))


PASV = R(227, "Entering Passive Mode (10,203,0,3,19,137).")


class Wire:
    """The flow and what it sent, per side, in order."""

    def __init__(self, flow: PipeFlow) -> None:
        self.flow = flow
        self.sent = {A: [], B: []}
        self.auto = ("ALLO", "PORT")  # answered 200 as they go

    def pump(self) -> list[str]:
        out = self.flow.sendable()
        for s in out:
            self.sent[s.side].append(s)
        for s in out:
            if s.line.startswith(self.auto):
                assert self.flow.answered(s, R(200)) == []
        return [f"{'A' if s.side is A else 'B'}: {s.line}" for s in out]

    def find(self, side: Side, line: str):
        return next(s for s in self.sent[side] if s.line == line and s in self.flow.outstanding[side])

    def first(self, side: Side, line: str, code: int = 150) -> list[str]:
        self.flow.began(self.find(side, line), R(code))
        return self.pump()

    def final(self, side: Side, line: str, code: int = 226):
        events = self.flow.answered(self.find(side, line), R(code))
        return events, self.pump()

    def answer_all(self, side: Side, code: int = 200) -> list:
        events = []
        for s in [s for s in self.sent[side] if s in self.flow.outstanding[side]]:
            events += self.flow.answered(s, R(code))
        return events


def opened(n: int = 3, streams: int = 2) -> tuple[Wire, list]:
    w = Wire(PipeFlow(streams))
    files = [w.flow.add(f"/a/f{i}", f"/b/f{i}", 1000 + i) for i in range(n)]
    opts = f"OPTS RETR Parallelism={streams},{streams},{streams};"
    assert w.pump() == ["B: MODE E", "A: MODE E", f"A: {opts}", "B: PASV"]
    assert w.pump() == []  # nothing until B's address
    for line in ("MODE E", opts):
        w.flow.answered(w.find(A, line), R(200))
    assert w.flow.answered(w.find(B, "MODE E"), R(200)) == []
    assert w.flow.answered(w.find(B, "PASV"), PASV) == []
    return w, files


def f0_at_b() -> tuple[Wire, list]:
    """Three files open, every RETR sent; A sent f0 whole (226), B still stores it."""
    w, files = opened()
    w.pump()
    w.first(A, "RETR /a/f0")
    w.first(B, "STOR /b/f0")
    w.final(A, "RETR /a/f0")
    return w, files


def answer_pasv(w: Wire, pasv: Reply) -> list:
    """The open sent and A's setup and B's MODE E answered 200: the events of B's answer to PASV."""
    w.pump()
    w.answer_all(A)
    w.flow.answered(w.find(B, "MODE E"), R(200))
    return w.flow.answered(w.find(B, "PASV"), pasv)


def test_a_runs_ahead_and_b_stores_only_what_a_started_one_at_a_time():
    w, files = opened()
    # A: PORT and every RETR at once (A runs them in order); B: nothing yet
    assert w.pump() == ["A: PORT 10,203,0,3,19,137", "A: RETR /a/f0", "A: RETR /a/f1", "A: RETR /a/f2"]
    assert w.first(A, "RETR /a/f0") == ["B: ALLO 1000", "B: STOR /b/f0"]
    # A started f1 too, but B has not answered STOR f0: STOR f1 waits
    w.final(A, "RETR /a/f0")
    assert w.first(A, "RETR /a/f1") == []
    assert w.first(B, "STOR /b/f0", 125) == ["B: ALLO 1001", "B: STOR /b/f1"]
    events, _ = w.final(B, "STOR /b/f0")
    assert events == [FileDone(files[0])]
    assert not files[0].cached and files[1].cached  # f0 opened the streams, f1 rides them
    # B answered STOR f1 (1yz) but A has not started f2: STOR f2 waits for that
    assert w.first(B, "STOR /b/f1", 125) == []
    w.final(A, "RETR /a/f1")
    assert w.first(A, "RETR /a/f2") == ["B: ALLO 1002", "B: STOR /b/f2"]


def test_a_retr_refused_fails_that_file_alone_and_gets_no_stor():
    w, files = f0_at_b()
    events, sent = w.final(A, "RETR /a/f1", 550)  # A's first reply: a refusal
    assert [type(e) for e in events] == [FileFailed] and events[0].file is files[1] and events[0].alone
    assert not files[1].cached
    assert "RETR /a/f1 failed on the source: 550" in events[0].reason
    assert sent == []
    assert w.first(A, "RETR /a/f2") == ["B: ALLO 1002", "B: STOR /b/f2"]  # f1 skipped on B
    assert not any("f1" in s.line for s in w.sent[B])
    assert w.flow.state is State.OPEN


def test_a_stor_refused_breaks_the_streams_a_is_aborted_the_rest_go_back_then_new_streams():
    w, files = f0_at_b()
    w.first(A, "RETR /a/f1")  # (STOR f1 goes: A started f1)
    w.final(B, "STOR /b/f0")
    events, sent = w.final(B, "STOR /b/f1", 553)  # B's first reply: refused; f1's blocks are on the streams
    assert [type(e) for e in events] == [FileFailed, FileBack]
    assert events[0].file is files[1] and not events[0].alone and events[1].file is files[2]
    assert sent == ["A: ABOR"]  # A still runs f1 and holds f2
    assert w.flow.state is State.SETTLING and w.pump() == []
    # ABOR's replies: the running RETR 426, the waiting one 426, ABOR 226
    assert w.flow.answered(w.find(A, "RETR /a/f1"), R(426)) == []
    assert w.flow.answered(w.find(A, "RETR /a/f2"), R(426)) == []
    assert w.flow.answered(w.find(A, "ABOR"), R(226)) == []
    assert w.flow.settled and w.pump() == []  # nothing left to send: closed
    assert w.flow.state is State.CLOSED
    again = w.flow.add("/a/f2", "/b/f2", 1002)
    assert w.pump() == ["B: MODE E", "A: MODE E", "A: OPTS RETR Parallelism=2,2,2;", "B: PASV"]
    assert again.seq == 3


def test_a_failure_at_a_while_b_still_stores_the_file_before_lets_that_one_finish():
    w, files = f0_at_b()
    w.first(A, "RETR /a/f1")  # -> STOR f1 queued at B
    events, sent = w.final(A, "RETR /a/f1", 451)  # A fails f1 mid-transfer
    assert [type(e) for e in events] == [FileFailed, FileBack] and events[0].file is files[1]
    assert sent == ["A: ABOR"]  # A holds f2; B still stores f0: no ABOR there yet
    events, sent = w.final(B, "STOR /b/f0")
    assert events == [FileDone(files[0])]
    assert sent == ["B: ABOR"]  # only the broken file's STOR left there now
    assert w.answer_all(A, 426) == []
    assert w.answer_all(B, 426) == []
    assert w.flow.settled and w.pump() == [] and w.flow.state is State.CLOSED


def test_b_is_aborted_once_only_the_broken_files_are_left_there():
    w, files = opened()
    w.pump()
    w.first(A, "RETR /a/f0")
    w.first(B, "STOR /b/f0")
    w.first(A, "RETR /a/f1")
    w.final(A, "RETR /a/f0")
    w.final(B, "STOR /b/f0")
    w.first(B, "STOR /b/f1")
    events, sent = w.final(A, "RETR /a/f1", 426)  # A lost a stream while B stores f1
    assert events[0].file is files[1] and sent == ["A: ABOR", "B: ABOR"]


def test_a_refused_setup_fails_the_first_file_and_the_next_file_tries_again():
    w = Wire(PipeFlow(1))
    f0, f1 = w.flow.add("/a/x", "/b/x"), w.flow.add("/a/y", "/b/y")
    events = answer_pasv(w, R(500, "no"))
    assert [type(e) for e in events] == [FileFailed, FileBack] and events[0].file is f0
    assert "refused PASV" in events[0].reason and events[1].file is f1
    assert w.pump() == [] and w.flow.state is State.CLOSED


@pytest.mark.parametrize("pasv, why", [(R(200, "PASV done"), "refused PASV (200 PASV done)"),
                                       (R(227, "Entering Passive Mode (::1)."), "no IPv4 address")])
def test_a_pasv_answered_without_an_address_fails_the_first_file(pasv, why):
    w = Wire(PipeFlow(1))
    f0 = w.flow.add("/a/x", "/b/x")
    events = answer_pasv(w, pasv)
    assert [e.file for e in events] == [f0] and why in events[0].reason


def test_a_refused_port_fails_the_first_file():
    w, files = opened(2, 1)
    w.auto = ("ALLO",)
    w.pump()
    events = w.flow.answered(w.find(A, "PORT 10,203,0,3,19,137"), R(501, "Rejected"))
    assert events[0].file is files[0] and "active mode (PORT) on the source failed: 501" in events[0].reason
    assert w.answer_all(A, 425) == []  # the RETRs behind it
    assert w.pump() == [] and w.flow.state is State.CLOSED


def test_a_lost_connection_fails_the_first_unfinished_file_the_rest_go_back():
    w, files = opened()
    w.pump()
    w.first(A, "RETR /a/f0")
    events = w.flow.lost(B, "closed by the server")
    assert [type(e) for e in events] == [FileFailed, FileBack, FileBack]
    assert [e.file for e in events] == files
    assert "lost the control connection to the destination" in events[0].reason


def test_rest_carries_the_ranges_b_holds_on_both_and_allo_the_size():
    w = Wire(PipeFlow.on_open_streams(1))
    f = w.flow.add("/a/r", "/b/r", 5000, ((0, 1000), (2000, 3000)))
    assert w.pump() == ["A: REST 0-1000,2000-3000", "A: RETR /a/r"]
    assert w.first(A, "RETR /a/r") == ["B: ALLO 5000", "B: REST 0-1000,2000-3000", "B: STOR /b/r"]
    assert f.cached and f.a is Stage.STARTED


def test_an_allo_refusal_is_not_a_failure():
    w = Wire(PipeFlow.on_open_streams(1))
    f = w.flow.add("/a/r", "/b/r", 7)
    w.pump()
    w.flow.began(w.find(A, "RETR /a/r"), R(150))
    allo = next(s for s in w.flow.sendable() if s.line == "ALLO 7")
    assert w.flow.answered(allo, R(502)) == []
    w.sent[B] += [s for s in w.flow.outstanding[B] if s not in w.sent[B]]
    w.first(B, "STOR /b/r")
    w.final(A, "RETR /a/r")
    events, _ = w.final(B, "STOR /b/r", 250)
    assert events == [FileDone(f)]


def test_one_stream_unless_told_and_only_a_transfers_1yz_starts_its_file():
    w = Wire(PipeFlow())
    f = w.flow.add("/a/x", "/b/x", held=((0, 10),))
    assert "A: OPTS RETR Parallelism=1,1,1;" in w.pump()
    w.answer_all(A)
    w.flow.answered(w.find(B, "MODE E"), R(200))
    w.flow.answered(w.find(B, "PASV"), PASV)
    assert w.flow.state is State.OPEN
    w.pump()
    w.flow.began(w.find(A, "REST 0-10"), R(150))  # (a 1yz to REST starts nothing)
    assert f.a is Stage.SENT
    w.flow.began(w.find(A, "RETR /a/x"), R(150))
    assert f.a is Stage.STARTED and f.b is Stage.WAITING


def test_a_retr_failing_after_its_1yz_breaks_the_streams_before_b_got_its_stor():
    w, files = opened()
    w.pump()
    w.first(A, "RETR /a/f0")  # -> STOR f0
    w.final(A, "RETR /a/f0")
    w.first(A, "RETR /a/f1")  # B has not answered STOR f0: no STOR f1 yet
    events, sent = w.final(A, "RETR /a/f1", 426)  # A's streams went with it
    assert [type(e) for e in events] == [FileFailed, FileBack] and not events[0].alone
    assert files[1].b is Stage.WAITING and not files[1].cached
    assert sent == ["A: ABOR"]
