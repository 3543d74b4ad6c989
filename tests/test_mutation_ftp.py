"""Rules of the sans-IO FTP modules (drsftp/ftp) the other unit tests left
open: each test kills mutants benchmarks/mutation.py found surviving
(docs/MUTATION.md).  Expected values come from the RFCs, GFD.20 and the
docs, written here, not read back from the modules' constants."""

import dataclasses

import pytest

from drsftp.client.session.credentials import locate
from drsftp.ftp import eblock, safepath
from drsftp.ftp.blockplan import BlockPlan
from drsftp.ftp.eblock import BlockDecoder, BlockError, Data, EndOfData, EndOfFile, RangeSet, ReceiveLedger
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
from drsftp.ftp.listing import (
    FILE,
    LINK,
    Entry,
    parse_list_line,
    parse_mlst_reply,
    parse_mlsx_line,
    parse_time_val,
)
from drsftp.ftp.partname import final_name, partial_name
from drsftp.ftp.relay import Relay, window_of
from drsftp.ftp.replies import Reply
from drsftp.ftp.safepath import UnsafePath, check_name, local_path
from drsftp.ftp.thirdparty import CopyError, CopyFlow, CopySpec, Done, Failed, Phase, Side, port_argument, rest_argument
from drsftp.ftp.url import URLError

# -- safepath (docs/SECURITY.md: a listed name is one component of at most 255 bytes) --


def test_a_name_of_255_utf8_bytes_passes_and_256_is_refused():
    assert check_name("a" * 255) == "a" * 255
    assert check_name("é" * 127 + "a") == "é" * 127 + "a"  # 255 bytes in 128 characters
    for name in ("a" * 256, "é" * 128):  # 256 bytes
        with pytest.raises(UnsafePath, match="255 bytes"):
            check_name(name)


@pytest.mark.parametrize("root, want", [(".", "./a/b"), ("./", "./a/b"), ("", "a/b")])
def test_a_destination_given_as_the_current_directory_takes_clean_names(root, want):
    """DEST "." (``drsftp get -r URL/ .``): "./a/b" normalises to "a/b",
    which is below "." all the same."""
    assert local_path(root, ("a", "b")) == want


@pytest.mark.parametrize("root, parts", [
    ("/r", ("..",)), ("/r", ("..", "x")), ("/r", (".",)), ("/r", ("/etc",)), ("/r", ("x", "../../y")),
    ("/", ("..",)), ("/", (".",)),
    (".", ("..",)), (".", ("..", "x")), (".", (".",)), (".", ("/etc",)), (".", ("x", "../../y")),
    ("r", ("..",)), ("r", ("..", "x")),
])
def test_local_path_asserts_its_result_is_below_the_root_even_if_a_name_check_failed(monkeypatch, root, parts):
    """local_path does not assume check_name refused every climbing part: it
    checks the joined path itself (docs/SECURITY.md, defence in depth)."""
    monkeypatch.setattr(safepath, "check_rel", lambda parts: parts)
    with pytest.raises(UnsafePath, match="leaves"):
        local_path(root, parts)


@pytest.mark.parametrize("root", ["/", "/r", "/r/", "r", ".", "r/.."])
def test_local_path_with_the_name_check_off_still_takes_clean_and_odd_names(monkeypatch, root):
    monkeypatch.setattr(safepath, "check_rel", lambda parts: parts)
    for parts in (("a",), ("..x", "b.."), ("...",)):
        assert local_path(root, parts).endswith("/".join(parts))


# -- extended block mode (GFD.20) -------------------------------------------------------

def test_an_eod_header_carries_neither_a_count_nor_an_offset():
    """GFD.20: EOD (0x08) ends a connection's part; count and offset are 0
    (the EOF's offset field alone carries a number, the EOD count)."""
    assert eblock.eod() == bytes([0x08]) + bytes(16)
    assert eblock.eod(close=True) == bytes([0x0C]) + bytes(16)


@pytest.mark.parametrize("event", [Data(0, memoryview(b"x")), EndOfFile(1), EndOfData(close=False)])
def test_decoded_events_are_values_no_consumer_can_change(event):
    field = dataclasses.fields(event)[0].name
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(event, field, getattr(event, field))


def test_a_connection_cannot_be_reused_with_one_payload_byte_or_part_of_a_header_left():
    dec = BlockDecoder()
    dec.feed(eblock.data_header(0, 2) + b"a")  # one byte of the block still to come
    assert dec.in_block
    with pytest.raises(BlockError, match="middle of a block"):
        dec.reset()
    dec = BlockDecoder()
    dec.feed(eblock.data_header(0, 1)[:5])  # a header split across reads
    assert dec.in_block
    with pytest.raises(BlockError, match="middle of a block"):
        dec.reset()
    dec.feed(eblock.data_header(0, 1)[5:] + b"z" + eblock.eod())
    assert not dec.in_block
    dec.reset()


@pytest.mark.parametrize("eods", [1, 2, 1 << 16])
def test_an_eof_announces_from_one_eod_up_to_65536(eods):
    """One stream is an EOD count of 1; drsftp's bound is 2^16 connections."""
    (ev,) = BlockDecoder().feed(eblock.header(0x40, 0, eods))
    assert ev == EndOfFile(eods)


def test_a_block_of_exactly_the_bound_or_ending_exactly_at_2_to_the_62_is_accepted():
    dec = BlockDecoder(max_count=8)
    (ev,) = dec.feed(eblock.data_header(0, 8) + b"12345678")
    assert bytes(ev.data) == b"12345678"
    with pytest.raises(BlockError, match="out of bounds"):
        BlockDecoder(max_count=8).feed(eblock.data_header(0, 9))
    assert BlockDecoder().feed(eblock.data_header((1 << 62) - 10, 10)) == []  # header alone: no payload yet
    with pytest.raises(BlockError, match="out of bounds"):
        BlockDecoder().feed(eblock.data_header((1 << 62) - 9, 10))


def test_rangesets_with_different_ranges_differ():
    assert RangeSet([(0, 1)]) != RangeSet([(0, 2)])
    assert RangeSet([(0, 1)]) != RangeSet([(5, 6)])
    assert RangeSet([(0, 1)]) != [(0, 1)]


def test_overlap_is_of_half_open_ranges_and_finds_the_range_before_the_end():
    rs = RangeSet([(0, 10), (20, 30)])
    assert not rs.overlaps(10, 20)  # [0,10) and [20,30) only touch [10,20)
    assert rs.overlaps(9, 10) and rs.overlaps(25, 26) and rs.overlaps(29, 40)
    assert not rs.overlaps(30, 31)


def test_nothing_is_missing_from_an_empty_file():
    assert RangeSet([(5, 6)]).missing(0) == []
    assert RangeSet().missing(0) == []


def test_an_empty_range_in_a_marker_is_well_formed_and_adds_nothing():
    assert RangeSet.parse("3-3") == RangeSet()
    assert RangeSet.parse("0-4,9-9") == RangeSet([(0, 4)])


def test_the_ledger_counts_the_new_bytes_and_the_size_is_the_end_of_the_last_range():
    led = ReceiveLedger(limit=1000, base=RangeSet([(0, 100)]))
    assert led.new_bytes == 0 and led.size() == 100
    led.data(300, 50)
    led.data(100, 20)
    assert led.new_bytes == 70 and led.size() == 350
    assert ReceiveLedger().size() == 0


def test_an_eof_after_all_its_eods_completes_the_transfer():
    led = ReceiveLedger()
    led.end_of_data()
    led.end_of_data()
    led.end_of_file(EndOfFile(2))  # EOF may come last, on any connection
    assert led.complete


def test_a_block_size_of_zero_is_refused_as_such():
    with pytest.raises(ValueError, match="block size"):
        BlockPlan([(0, 10)], 0)


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


# -- listings (RFC 3659 sec. 2.3 and 7; the Unix ls -l format of LIST) ------------------

JAN_1_2021 = 1609459200  # 2021-01-01 00:00:00 UTC


@pytest.mark.parametrize("text, want", [
    ("20210101000000", JAN_1_2021),
    ("20210101000000.25", JAN_1_2021 + 0.25),  # fractions of a second add
    ("20211231235959", JAN_1_2021 + 365 * 86400 - 1),  # month 12, day 31, hour 23, minute 59
    ("20201231235960", JAN_1_2021),  # second 60: a leap second
])
def test_a_time_val_is_utc_to_the_fraction(text, want):
    assert parse_time_val(text) == want


@pytest.mark.parametrize("text", ["20210001000000", "20211301000000", "20210100000000", "20210132000000",
                                  "20210101240000", "20210101006000", "20210101000061"])
def test_a_time_val_outside_its_fields_ranges_is_no_time(text):
    """RFC 3659 sec. 2.3: month 01-12, day 01-31, hour 00-23, minute 00-59,
    second 00-60."""
    assert parse_time_val(text) is None


def test_an_mlsd_line_needs_facts_a_space_and_a_name():
    assert parse_mlsx_line("type=file;size=1; ") is None  # no name after the space
    assert parse_mlsx_line("type=file;size=1;") is None  # no space
    assert parse_mlsx_line("type=file;size=1; x") == Entry("x", FILE, 1)


def test_an_mlst_reply_without_an_opening_line_still_gives_its_entry():
    """RFC 3659 sec. 7.2 puts the entry between an opening and a closing
    line; a reply of the entry and the closing line alone is read too."""
    assert parse_mlst_reply((" type=file;size=5; /f", "End")) == Entry("/f", FILE, 5)
    assert parse_mlst_reply(("type=file;size=5; /f",)) == Entry("/f", FILE, 5)


def test_a_list_line_keeps_an_arrow_in_a_files_name_and_splits_a_links_at_its_first():
    f = parse_list_line("-rw-r--r-- 1 u g 5 Jan 05  2021 a -> b")
    assert (f.name, f.type, f.target) == ("a -> b", FILE, None)
    ln = parse_list_line("lrwxrwxrwx 1 u g 5 Jan 05  2021 x -> y -> z")
    assert (ln.name, ln.type, ln.target) == ("x", LINK, "y -> z")


JUN_15_2021 = 1623715200  # 2021-06-15 00:00:00 UTC


@pytest.mark.parametrize("line_time, now, want", [
    ("Jun 14 10:20", JUN_15_2021, JUN_15_2021 - 86400 + 10 * 3600 + 20 * 60),  # this year, to the minute
    ("Jun 15 00:00", JUN_15_2021 + 3 * 3600, JUN_15_2021),
    ("Jun 16 00:00", JUN_15_2021, JUN_15_2021 + 86400),  # a day ahead (time zones): still this year
    ("Jun 16 00:00", JUN_15_2021 - 1, JUN_15_2021 + 86400 - 365 * 86400),  # more than a day ahead: last year
    ("Dec 31 23:59", JAN_1_2021 + 3600, JAN_1_2021 - 60),
    ("Jan 05  2021", JUN_15_2021, JAN_1_2021 + 4 * 86400),  # a year: midnight UTC of that day
])
def test_a_list_time_without_a_year_is_the_latest_not_more_than_a_day_ahead(line_time, now, want):
    """ls -l shows HH:MM for the last six months: the year is the one that
    puts the time at most a day after now (clocks and time zones), else the
    year before."""
    e = parse_list_line(f"-rw-r--r-- 1 u g 5 {line_time} f", now=now)
    assert e.mtime == want


def test_listing_entries_are_values_no_consumer_can_change():
    with pytest.raises(dataclasses.FrozenInstanceError):
        Entry("x", FILE).name = "y"


# -- session helpers: partial names, URLs, ~/.netrc -----------------------------------

@pytest.mark.parametrize("path", ["d/NAME", "/a/b/x", "x", "d/.hidden", "d/a.part"])
def test_the_final_name_of_a_partial_name_is_the_name_it_stands_for(path):
    assert final_name(partial_name(path)) == path


@pytest.mark.parametrize("path", ["d/x.part", "d/.x", "d/.part", "d/..part", "..part", "d/x"])
def test_a_name_that_is_no_partial_name_is_its_own_final_name(path):
    """A partial name is "." + NAME + ".part" with NAME not empty."""
    assert final_name(path) == path


def test_ftps_urls_default_to_the_implicit_ftps_port_990(tmp_path):
    """RFC 4217 sec. 7 and IANA: implicit FTPS listens on 990, FTP on 21."""
    rc = tmp_path / "netrc"
    rc.write_text("")
    assert locate("ftps://h/f", str(rc)).port == 990
    assert locate("ftp://h/f", str(rc)).port == 21


def test_an_unreadable_or_malformed_netrc_is_a_plain_error(tmp_path):
    bad = tmp_path / "netrc"
    bad.write_text("machine\n")
    with pytest.raises(URLError, match=r"cannot read .*missing 'machine' name"):
        locate("ftp://h/f", str(bad))
    with pytest.raises(URLError, match=r"cannot read .*: is a directory"):
        locate("ftp://h/f", str(tmp_path))


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


# -- third-party copies: relayed DRS (docs/THIRDPARTY.md, "DRS on the data path") ------------

def test_the_relay_counts_only_commands_that_carried_the_others_numbers():
    """--json "relayed": DRS commands that carried the other server's numbers."""
    relay = Relay(True, True)
    assert relay.sent_count == {Side.SOURCE: 0, Side.DEST: 0}
    relay.sent(Side.SOURCE, 5.0, "DRS")
    relay.sent(Side.DEST, 5.0, "DRS rtt_us=100")
    relay.sent(Side.DEST, 5.1, "DRS rtt_us=100")
    assert relay.sent_count == {Side.SOURCE: 0, Side.DEST: 2}


def test_the_record_counts_seconds_from_the_first_drs_command():
    relay = Relay(True, True)
    relay.sent(Side.SOURCE, 5.0, "DRS")
    relay.on_reply(Side.SOURCE, 5.25, 200, "DRS rtt_us=1000")
    relay.on_reply(Side.SOURCE, 5.5, 200, "DRS rtt_us=1000")
    assert [row["t"] for row in relay.record()["source"]] == [0.25, 0.5]


def test_streams_asked_by_p_auto_go_to_the_source_only():
    relay = Relay(True, True)
    relay.wanted_streams = 3
    assert "streams" not in relay.command(Side.DEST)
    assert relay.wanted_streams == 3 and relay.command(Side.SOURCE) == "DRS streams=3"


def test_the_relay_reads_nothing_as_zero_and_a_one_microsecond_rtt_as_an_rtt():
    relay = Relay(True, True)
    assert (relay.moved(), relay.rate(), relay.retransmits(), relay.data_rtt()) == (0, 0.0, 0, None)
    relay.on_reply(Side.SOURCE, 0.0, 200, "DRS rtt_us=1 rate=300 retrans=2 bytes=40")
    assert relay.data_rtt() == 1e-06 and relay.rate() == 300.0 and relay.retransmits() == 2
    assert relay.moved() == 40  # (A's acknowledged bytes while B reports none)
    relay.on_reply(Side.DEST, 0.0, 200, "DRS rate=200 bytes=30")
    assert relay.rate() == 200.0 and relay.moved() == 30  # B's, from its base 0


def test_progress_never_counts_below_the_destinations_base():
    relay = Relay(True, True)
    relay.bytes_base = 1000
    relay.on_reply(Side.DEST, 0.0, 200, "DRS bytes=1000")
    assert relay.moved() == 0
    relay.on_reply(Side.DEST, 0.1, 200, "DRS bytes=900")
    assert relay.moved() == 0


def test_a_reports_window_is_the_receivers_else_the_senders():
    assert window_of({"wnd": 5, "cwnd": 7}) == 5 and window_of({"cwnd": 7}) == 7
    assert window_of({"rtt_us": 9}) is None
