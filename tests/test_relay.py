"""drsftp/ftp/relay.py: the client relaying DRS figures between the two servers
of a copy (docs/PROTOCOL.md, "DRS, relayed by the client").  Expected values
come from the RFCs and the docs, written here, not read back from the module's
constants (docs/MUTATION.md: many of these tests pin a rule a mutation run
found open)."""

from drsftp.ftp.relay import Relay, window_of
from drsftp.ftp.thirdparty import Side

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
