"""Boundaries and small rules the other unit tests left open: each test here
kills mutants benchmarks/mutation.py found surviving (docs/MUTATION.md).
Expected values come from the RFCs and docs/PROTOCOL.md, written here."""

import dataclasses

import pytest

from drsftp.ftp import drscmd
from drsftp.ftp.replies import ProtocolError, Reply, ReplyParser, parse_epsv, parse_pasv
from drsftp.ftp.session import FTPLocation, parse_url
from drsftp.tuning import Decision, DRSTuning, PeerReport, Role, Sample
from drsftp.tuning.budget import BufferBudget

KiB, MiB = 1 << 10, 1 << 20

# -- DRS command grammar (docs/PROTOCOL.md, "Replies": the bounds) ----------------

BOUNDS = {"rtt_us": 60_000_000, "cwnd": 1 << 34, "inflight": 1 << 34, "wnd": 1 << 34, "rate": 1 << 40,
          "bytes": 1 << 62, "future_key": 1 << 62}


@pytest.mark.parametrize("key", sorted(BOUNDS))
def test_each_drs_value_bound_is_inclusive(key):
    bound = BOUNDS[key]
    assert drscmd.parse_args(f"{key}={bound}") == {key: bound}
    with pytest.raises(drscmd.DRSArgumentError):
        drscmd.parse_args(f"{key}={bound + 1}")


def test_at_most_16_pairs():
    sixteen = " ".join(f"k{i}=1" for i in range(16))
    assert len(drscmd.parse_args(sixteen)) == 16
    with pytest.raises(drscmd.DRSArgumentError):
        drscmd.parse_args(sixteen + " k16=1")


def test_a_report_carries_the_values_in_si_units_and_drops_zeros():
    pairs = drscmd.parse_args("rtt_us=1500 cwnd=1000 inflight=900 wnd=800 rate=700 bytes=1")
    assert drscmd.to_report(pairs) == PeerReport(rtt=0.0015, cwnd=1000, inflight=900, window=800, rate=700,
                                                 bytes=1)
    assert drscmd.to_report(drscmd.parse_args("rtt_us=0 cwnd=0 bytes=0")) == PeerReport()


def test_reply_pairs_keep_zero_drop_negatives_and_unknowns():
    assert drscmd.format_pairs({"a": 0, "b": -1, "c": None, "d": 2.9}) == "a=0 d=2"


def test_reply_text_must_start_with_the_word_drs():
    assert drscmd.parse_reply_text("") == {}
    assert drscmd.parse_reply_text("Transfer a=1") == {}
    assert drscmd.parse_reply_text("DRS a=1 note") == {"a": 1}


# -- FTP replies (RFC 959 sec. 4.2) --------------------------------------------

def test_reply_classes_by_first_digit():
    """1yz preliminary; 2yz and 3yz success so far; 4yz, 5yz failures."""
    for code, preliminary, ok in ((100, True, False), (199, True, False), (200, False, True),
                                  (399, False, True), (400, False, False)):
        r = Reply(code, ("x",))
        assert (r.preliminary, r.ok) == (preliminary, ok), code


def test_an_empty_line_is_no_reply():
    with pytest.raises(ProtocolError):
        ReplyParser().feed(b"\r\n")


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


# -- URLs and ~/.netrc -----------------------------------------------------------

def test_netrc_password_only_for_its_own_login(tmp_path):
    rc = tmp_path / "netrc"
    rc.write_text("machine h login alice password pw\n")
    rc.chmod(0o600)
    assert parse_url("ftp://h/f", str(rc)) == FTPLocation("h", 21, "alice", "pw", "/f")
    assert parse_url("ftp://alice@h/f", str(rc)).password == "pw"
    assert parse_url("ftp://bob@h/f", str(rc)).password == ""  # never alice's password for bob


def test_anonymous_gets_a_placeholder_password(tmp_path):
    loc = parse_url("ftp://h:2121/d/f", str(tmp_path / "no-netrc"))
    assert (loc.user, loc.password, loc.port) == ("anonymous", "drsftp@", 2121)


# -- the tuning interface's value objects ------------------------------------------

def test_decisions_merge_and_diff_field_by_field():
    assert Decision().is_empty()
    assert not Decision(rcv_window=1).is_empty() and not Decision(notsent=1).is_empty()
    assert Decision(1, 2, 3).changes_from(Decision(1, 5, 3)) == Decision(None, 2, None)
    assert Decision(None, 2, None).over(Decision(1, 5, 3)) == Decision(1, 2, 3)


def test_value_objects_are_immutable_and_counts_start_at_zero():
    """Decisions, samples, reports, replies and URLs are passed between the
    sans-IO cores and the drivers; none may change under another's hands."""
    for obj in (Decision(1), Sample(), PeerReport(), Reply(200, ("x",)), FTPLocation("h", 21, "u", "p", "/f")):
        with pytest.raises(dataclasses.FrozenInstanceError):
            obj.x = 1
    assert (Sample().bytes_received, Sample().bytes_acked) == (0, 0)


# -- the server's buffer budget ----------------------------------------------------

def test_a_budget_must_be_positive():
    for total in (0, -1):
        with pytest.raises(ValueError):
            BufferBudget(total)
    assert BufferBudget(1).total == 1


def test_send_buffers_share_the_budget_in_proportion_to_need():
    b = BufferBudget(30 * MiB)
    b.limit("small", Decision(sndbuf=10 * MiB))
    assert b.limit("big", Decision(sndbuf=50 * MiB)) == Decision(sndbuf=20 * MiB)  # what the small one leaves
    assert b.limit("small", Decision(sndbuf=10 * MiB)) == Decision(sndbuf=5 * MiB)  # 30 x 10/60
    assert b.granted_total() == 25 * MiB


def test_a_flow_that_wants_nothing_holds_nothing():
    b = BufferBudget(30 * MiB)
    assert b.limit("idle", Decision()) == Decision()
    assert b.granted_total() == 0


def test_a_squeezed_flow_keeps_a_64_kib_floor():
    b = BufferBudget(10 * MiB)
    assert b.limit("first", Decision(rcv_window=10 * MiB)) == Decision(rcv_window=10 * MiB)
    # nothing left: the newcomer still gets the floor, the others give back at their next call
    assert b.limit("late", Decision(rcv_window=100 * KiB)) == Decision(rcv_window=64 * KiB)


def test_n_floors_never_exceed_the_budget():
    b = BufferBudget(100_000)
    for _ in range(3):
        grants = [b.limit(i, Decision(rcv_window=1 * MiB)).rcv_window for i in range(3)]
    assert grants == [33333] * 3 and all(type(g) is int for g in grants)  # 100000 // 3 each
    assert b.granted_total() <= 100_000


def test_claims_leave_the_rest_to_share():
    b = BufferBudget(30 * MiB)
    assert b.claim("auto", 10 * MiB)  # a buffer left to autotuning, counted whole
    for _ in range(2):
        a = b.limit("a", Decision(rcv_window=40 * MiB))
        c = b.limit("c", Decision(rcv_window=40 * MiB))
    assert a == c == Decision(rcv_window=10 * MiB)  # (30 - 10) / 2 each
    assert b.granted_total() == 30 * MiB


def test_reservations_are_whole_bytes_and_holds_keep_what_they_say():
    b = BufferBudget(1001)
    assert b.reserve("hs", 10_000) == 500  # half of what is free, rounded down
    b.release("hs")
    b.limit("f", Decision(rcv_window=100))
    b.hold("f", 1)
    assert b.granted_total() == 1


# -- DRS's clamp (docs/DESIGN.md item 7: [floor 256 KiB, cap], cap 64 MiB by default) --

def test_drs_window_starts_at_256_kib_and_stops_at_64_mib():
    drs = DRSTuning(Role.RECEIVER)
    assert drs.on_sample(Sample(bytes_received=0), now=0.0, rtt=0.1) == Decision(rcv_window=256 * KiB,
                                                                                 sndbuf=16 * KiB)
    total = 0
    for i in range(1, 80):
        total += 100 * MiB  # 1 GB/s for 100 ms per tick: far past the cap
        drs.on_sample(Sample(bytes_received=total), now=i * 0.05, rtt=0.1)
    assert drs.window == 64 * MiB
