"""The sans-IO parts of parallel transfers: the range plan (work stealing),
the resume record, the MODE E send queue and the -P auto controller."""

import pytest

from drsftp.client.streams.modee.send import BlockQueue
from drsftp.client.streams.rangeplan import MIN_STEAL, RangePlan, ResumeRecord
from drsftp.ftp.eblock import RangeSet, parse_parallel
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
from drsftp.tuning.count.streams import Action, StreamController, StreamSample, StreamsConfig

MiB = 1 << 20


def test_plan_splits_the_file_into_one_range_per_worker():
    plan = RangePlan(64 * MiB)
    plan.split(4)
    got = sorted((a.start, a.end) for a in (plan.take(w) for w in range(4)))
    assert got == [(0, 16 * MiB), (16 * MiB, 32 * MiB), (32 * MiB, 48 * MiB), (48 * MiB, 64 * MiB)]


def test_a_finished_worker_steals_the_second_half_of_the_largest_range_left():
    plan = RangePlan(40 * MiB)
    plan.split(2)
    a, b = plan.take(0), plan.take(1)
    plan.advance(0, 20 * MiB)  # worker 0 done with [0, 20)
    plan.release(0)
    plan.advance(1, 4 * MiB)  # worker 1 at 24 MiB of [20, 40)
    stolen = plan.take(0)
    assert (stolen.start, stolen.end) == (32 * MiB, 40 * MiB)
    assert b.end == 32 * MiB  # the slow worker now stops there
    assert a.done


def test_no_steal_below_twice_the_minimum():
    plan = RangePlan(3 * MIN_STEAL)
    plan.take(0)
    assert plan.can_take()  # 3 x MIN_STEAL ahead of worker 0: half of it can go
    plan.advance(0, 2 * MIN_STEAL)
    assert not plan.can_take()
    assert plan.take(1) is None  # one MIN_STEAL left: not worth a session


def test_a_worker_cannot_write_past_its_range_and_held_is_what_was_written():
    plan = RangePlan(10 * MiB, held=RangeSet([(0, 2 * MiB)]))
    asg = plan.take(0)
    assert (asg.start, asg.end) == (2 * MiB, 10 * MiB)
    plan.advance(0, MiB)
    with pytest.raises(ValueError):
        plan.advance(0, 8 * MiB)
    assert list(plan.held) == [(0, 3 * MiB)]


def test_a_stream_given_back_returns_its_rest_to_the_free_list():
    plan = RangePlan(8 * MiB)
    plan.take(0)
    plan.advance(0, MiB)
    plan.give_back(0)
    plan.release(0)
    nxt = plan.take(1)
    assert (nxt.start, nxt.end) == (MiB, 8 * MiB)


def test_resume_record_round_trip_and_rejects():
    rec = ResumeRecord(100, "20260101000000", RangeSet([(0, 10), (50, 60)]))
    back = ResumeRecord.from_json(rec.to_json())
    assert back.held == rec.held and back.size == 100 and back.matches(100, "20260101000000")
    assert not back.matches(101, "20260101000000")
    assert not back.matches(100, "20270101000000")
    for bad in ('{"size": 10, "ranges": [[0, 11]]}', '{"size": -1}', '[]', '{"size": 10, "ranges": [[5, 2]]}'):
        with pytest.raises(ValueError):
            ResumeRecord.from_json(bad)


def test_parse_parallel():
    assert parse_parallel("4") == 4 and parse_parallel("auto") is None
    for bad in ("0", "65", "x"):
        with pytest.raises(ValueError):
            parse_parallel(bad)


def test_block_queue_the_last_stream_carries_the_eof_with_every_eod():
    q = BlockQueue([(0, 10 * MiB)], 4 * MiB)
    assert q.join() and q.join()
    assert q.next() == (0, 4 * MiB) and q.next() == (4 * MiB, 4 * MiB) and q.next() == (8 * MiB, 2 * MiB)
    assert q.next() is None
    assert not q.join()  # nothing left: no third stream
    assert q.finish() is None  # the first done sends EOD only
    assert q.finish() == 2  # the last: EOF, EOD count 2


def test_block_queue_a_stream_that_could_not_connect():
    q = BlockQueue([(0, 2 * MiB)], MiB)
    assert q.join() and q.join()  # the second is still connecting
    assert q.next() and q.next() and q.next() is None
    assert q.finish() is None  # the first: EOD only, the EOF is owed to the second
    assert q.leave()  # which never connected: nobody can send the EOF now (an error)
    q2 = BlockQueue([(0, 2 * MiB)], MiB)
    assert q2.join() and q2.join()
    assert not q2.leave()  # left before anyone finished: the first will send the EOF
    assert q2.next() and q2.next() and q2.finish() == 1


def test_block_queue_empty_file_still_gets_one_stream():
    q = BlockQueue([], MiB)
    assert q.join() and not q.join()
    assert q.finish() == 1


# -- -P auto: synthetic figures ------------------------------------------------------

FLAT = [StreamSample(rtt=0.100, rtt_min=0.100, retransmits=0)]
QUEUED = [StreamSample(rtt=0.150, rtt_min=0.100, retransmits=0)]  # 50 ms of queue on a 100 ms path


def run(ctl, goodputs, samples=FLAT):
    return [ctl.update(g, samples) for g in goodputs]


def test_auto_adds_streams_while_the_sum_grows_with_no_queue():
    # Each stream is window-bound at 40 MB/s on a 1 Gbit/s (125 MB/s) path:
    # 2 streams 80, 3 streams 120, then the path is full (4 streams: 122).
    cfg = StreamsConfig(start=2, settle=4, judge=2)
    ctl = StreamController(cfg)
    per = {2: 80e6, 3: 120e6, 4: 122e6}
    actions = []
    for _ in range(40):
        actions.append(ctl.update(per.get(ctl.streams, 122e6), FLAT))
    assert actions[:5] == [Action.HOLD] * 3 + [Action.ADD, Action.HOLD]  # probe after settle intervals
    assert Action.REMOVE in actions  # the 4th stream added 2%: given back
    assert ctl.streams == 3


def test_auto_gives_the_probe_back_when_the_path_queues():
    ctl = StreamController(StreamsConfig(start=2, settle=4))
    assert run(ctl, [80e6] * 4)[-1] is Action.ADD
    # the new stream's sum grew, but the RTT rose 50% over its minimum: a queue
    assert run(ctl, [100e6, 100e6], QUEUED)[-1] is Action.REMOVE
    assert ctl.streams == 2


def test_auto_holds_while_the_path_shows_a_queue_or_new_retransmits():
    ctl = StreamController(StreamsConfig(start=2, settle=4))
    assert set(run(ctl, [80e6] * 10, QUEUED)) == {Action.HOLD}
    lossy = StreamController(StreamsConfig(start=2, settle=4))
    acts = [lossy.update(80e6, [StreamSample(0.1, 0.1, retransmits=i * 10)]) for i in range(10)]
    assert set(acts) == {Action.HOLD}  # retransmits rise every interval


def test_auto_backs_off_after_a_failed_probe_and_respects_the_bounds():
    ctl = StreamController(StreamsConfig(start=1, max_streams=2, settle=2, judge=1))
    acts = run(ctl, [50e6] * 2)
    assert acts[-1] is Action.ADD and ctl.streams == 2
    assert run(ctl, [50e6] * 2)[-1] is Action.REMOVE  # no gain
    # the next probe waits twice as long (4 intervals)
    assert run(ctl, [50e6] * 3) == [Action.HOLD] * 3
    assert run(ctl, [50e6])[-1] is Action.ADD
    assert run(ctl, [100e6] * 2)[-1] is Action.HOLD  # kept: doubled the sum
    assert set(run(ctl, [100e6] * 10)) == {Action.HOLD}  # at max_streams


def test_auto_undoes_a_change_the_driver_could_not_make():
    ctl = StreamController(StreamsConfig(start=2, settle=2, max_backoff=8))
    assert run(ctl, [80e6] * 2)[-1] is Action.ADD
    ctl.refused(Action.ADD)  # e.g. no range left worth a session
    assert ctl.streams == 2
    assert run(ctl, [80e6] * 7) == [Action.HOLD] * 7  # waits the longest backoff
    assert run(ctl, [80e6])[-1] is Action.ADD


# -- the transfer flow (sans-IO command sequence) -----------------------------------

def R(code, text="x"):
    return Reply(code, (text,))


def test_flow_mode_e_get_sequence_and_markers():
    f = TransferFlow()
    for line, reply in (("TYPE I", R(200)), ("MODE E", R(200)), ("OPTS RETR Parallelism=4,4,4;", R(200))):
        assert f.send(line) == line.encode() + b"\r\n"
        assert isinstance(f.receive(line.split()[0], reply), Accepted)
    assert f.state is State.READY
    f.send("PORT 127,0,0,1,4,1")
    f.receive("PORT", R(200))
    f.send("REST 0-100,200-300")
    f.receive("REST", R(350))
    assert f.state is State.RESTARTED
    f.send("RETR /f")
    assert isinstance(f.receive("RETR", R(150)), TransferStarted)
    assert isinstance(f.receive("RETR", R(111, "Range Marker 0-1000")), Marker)
    f.send("DRS streams=2")  # allowed only while the transfer runs
    assert isinstance(f.receive("RETR", R(226)), TransferDone) and f.state is State.READY


def test_flow_refuses_what_the_state_does_not_allow():
    f = TransferFlow()
    for line in ("RETR /f", "REST 100", "ABOR", "DRS rate=1"):
        with pytest.raises(FlowError):
            f.send(line)
    f.send("EPSV")
    f.receive("EPSV", R(229, "(|||5000|)"))
    f.send("REST 100")
    f.receive("REST", R(350))
    with pytest.raises(FlowError):
        f.send("PASV")  # REST must be followed by the transfer command (RFC 959 5.4)


def test_flow_a_refused_or_cut_transfer_returns_to_ready():
    f = TransferFlow()
    f.send("PASV")
    f.receive("PASV", R(227))
    f.send("RETR /nope")
    assert isinstance(f.receive("RETR", R(550)), Refused) and f.state is State.READY
    with pytest.raises(FlowError):
        f.send("RETR /nope")  # the data address is spent
    f.send("PASV")
    f.receive("PASV", R(227))
    f.send("RETR /f")
    f.receive("RETR", R(150))
    assert isinstance(f.receive("RETR", R(426)), TransferEnded) and f.state is State.READY
    # a refused parameter leaves the state as it was
    f.send("MODE E")
    assert isinstance(f.receive("MODE", R(501)), Refused) and f.state is State.READY


def test_flow_a_listing_is_a_transfer_from_a_data_address():
    f = TransferFlow()
    with pytest.raises(FlowError):
        f.send("MLSD /d")  # no data address yet
    f.send("EPSV")
    f.send("MLSD /d")  # pipelined: allowed in the state EPSV leads to
    f.receive("EPSV", R(229, "(|||5000|)"))
    assert isinstance(f.receive("MLSD", R(150)), TransferStarted)
    assert isinstance(f.receive("MLSD", R(226)), TransferDone) and f.state is State.READY
    f.send("PASV")
    f.receive("PASV", R(227))
    f.send("REST 5")
    with pytest.raises(FlowError):
        f.send("LIST /d")  # a restart marker is for the RETR or STOR that follows it
    f2 = TransferFlow()
    f2.send("PASV")
    f2.receive("PASV", R(227))
    f2.send("LIST /d")
    assert isinstance(f2.receive("LIST", R(550)), Refused) and f2.state is State.READY


def test_flow_a_refused_command_that_would_not_move_the_state_keeps_the_batch_going():
    """A refused ALLO (a server that does not take it) changes nothing the
    STOR sent after it assumed: the transfer's DRS may still go out."""
    f = TransferFlow()
    f.send("EPSV")
    f.receive("EPSV", R(229, "(|||5000|)"))
    for line in ("ALLO 10", "STOR /f"):
        f.send(line)
    assert isinstance(f.receive("ALLO", R(502)), Refused)
    assert f.expected is State.TRANSFER
    f.receive("STOR", R(150))
    f.send("DRS rate=1")
    g = TransferFlow()
    g.send("EPSV")
    g.receive("EPSV", R(229, "(|||5000|)"))
    g.send("REST 5")
    g.send("RETR /f")
    assert isinstance(g.receive("REST", R(501)), Refused)
    assert g.expected is None  # RETR assumed a REST that did not happen: nothing more may go out
    with pytest.raises(FlowError):
        g.send("DRS rate=1")


def test_auto_starts_with_the_streams_the_buffer_cap_needs_at_this_rtt():
    from drsftp.tuning.count.streams import START_MAX, StreamsConfig, first_streams

    cap = 4 << 20  # wmem_max 4 MiB: one stream carries 335 Mbit/s at 100 ms
    assert first_streams(0.100, cap) == START_MAX == 8  # a long fat path: 10 Gbit/s would need 30
    assert first_streams(0.010, cap) == 3  # 10 ms: ceil(12.5 MB / 4 MiB)
    assert first_streams(0.0005, cap) == 1  # a LAN: one stream's cap carries it
    assert first_streams(0.100, None) == StreamsConfig().start  # FORCE: no cap to divide
    assert first_streams(None, cap) == StreamsConfig().start  # no RTT yet
    assert first_streams(0.100, cap, StreamsConfig(max_streams=2)) == 2


def test_the_block_queue_tapers_for_the_streams_it_was_built_for():
    """The queue hands out the transfer core's plan (drsftp/ftp/blockplan.py,
    tested in test_transfer_core), tapered for its streams: the streams
    that share it end together."""
    from drsftp.ftp.blockplan import BlockPlan

    q = BlockQueue([(0, 64 * MiB)], 4 * MiB, 16)
    got = []
    while (b := q.next()) is not None:
        got.append(b)
    assert got == BlockPlan([(0, 64 * MiB)], 4 * MiB).all(16)
    assert got[:2] == [(0, MiB), (MiB, 63 * MiB // 64)]  # at most the rest over 4 x 16 streams
    assert q.empty


def test_auto_makes_no_probe_the_transfer_would_end_before_judging():
    ctl = StreamController(StreamsConfig(start=2, settle=4, judge=2))
    quiet = [StreamSample(0.1, 0.1, 0)]
    for _ in range(3):
        assert ctl.update(100.0, quiet, intervals_left=50) is Action.HOLD  # settling
    assert ctl.update(100.0, quiet, intervals_left=5) is Action.HOLD  # 5 < 4 + 2: it could not pay off
    assert ctl.update(100.0, quiet, intervals_left=6) is Action.ADD and ctl.streams == 3


def test_the_servers_taper_counts_only_the_streams_still_sending():
    """drsftp serve's sender asks the one block plan (ftp/blockplan.py) for
    each block with the streams still sending; a stream retired by DRS
    streams=N takes no more blocks, so it does not shrink the others'
    (more headers for nothing)."""
    from types import SimpleNamespace

    from drsftp.ftp.blockplan import MIN_BLOCK, TAPER, block_size
    from drsftp.server.ftp.eblock.send import BytesSource, Send

    class Member:  # what the plan reads of a stream, and where _next puts its block
        def __init__(self, retire):
            self.retire, self.eod_queued, self.pos, self.left = retire, False, 0, 0
            self.nodelay = True  # (TCP_NODELAY at the EOD: set already, the fake has no socket)
            self.pending = b""  # what _next queues for the send path (headers, small blocks inline)
            self.moved, self.idle = 0, False

    def plan(retired):
        session = SimpleNamespace(data_timeout=0)  # no data timeout: no timer on an ioloop
        job = Send(session, BytesSource(b""), [(0, 64 * MiB)], 4)
        members = [Member(i < retired) for i in range(4)]
        job.members.update(members)
        sender, blocks = members[-1], []
        while True:
            job._next(sender)
            if sender.eod_queued:
                return blocks
            blocks.append((sender.pos, sender.left))

    all4, two_left = plan(0), plan(2)
    for blocks in (all4, two_left):
        assert sum(n for _, n in blocks) == 64 * MiB and blocks[0] == (0, block_size(64 * MiB, 4))
    # 8 MiB left: 4 streams get 512 KiB blocks, the 2 still sending 1 MiB
    at = {o: n for o, n in all4}, {o: n for o, n in two_left}
    left8 = next(o for o, _ in all4 if o >= 56 * MiB)
    assert at[0][left8] == max(MIN_BLOCK, (64 * MiB - left8) // (TAPER * 4))
    left8b = next(o for o, _ in two_left if o >= 56 * MiB)
    assert at[1][left8b] == max(MIN_BLOCK, (64 * MiB - left8b) // (TAPER * 2))
    assert len(two_left) < len(all4)
