"""drsftp/tuning/wirekeys.py: the DRS command's keys (docs/PROTOCOL.md,
"Keys"), named once for the grammar, a session's sums and the reports."""

import re

from drsftp.ftp import drscmd, drsexchange
from drsftp.tuning import wirekeys
from drsftp.tuning.count import sharing

NAMES = ("rtt_us", "cwnd", "inflight", "wnd", "rate", "bytes", "rcvbuf", "sndbuf", "retrans", "streams",
         "busy_us", "rwnd_lim_us", "sndbuf_lim_us")


def test_the_keys_are_docs_protocol_names_and_fit_the_grammar():
    keys = {v for k, v in vars(wirekeys).items() if k.isupper() and isinstance(v, str)}
    assert keys == set(NAMES)
    assert all(re.fullmatch(r"[a-z][a-z0-9_]{0,15}", k) for k in keys)


def test_every_bounded_key_is_a_key_and_no_key_has_two_bounds():
    assert set(wirekeys.FIELDS) | set(wirekeys.EXTRA_BOUNDS) <= set(NAMES)
    assert not set(wirekeys.FIELDS) & set(wirekeys.EXTRA_BOUNDS)
    assert set(wirekeys.LIMIT_KEYS) == {"busy_us", "rwnd_lim_us", "sndbuf_lim_us"}


def test_a_session_sums_every_count_and_splits_only_the_peers_flow_figures():
    assert set(wirekeys.SUMMED) == set(NAMES) - {"rtt_us", "streams"}
    assert set(wirekeys.SHARED) == {"bytes", "rate", "wnd", "inflight", "cwnd"}
    assert set(wirekeys.SHARED) <= set(wirekeys.SUMMED)


def test_the_grammar_the_exchange_and_the_sharing_read_the_same_keys():
    assert drscmd.FIELDS is wirekeys.FIELDS and drscmd.EXTRA_BOUNDS is wirekeys.EXTRA_BOUNDS
    assert drsexchange.SUMMED is wirekeys.SUMMED and drsexchange.SHARED is wirekeys.SHARED
    assert sharing.LIMIT_KEYS is wirekeys.LIMIT_KEYS
