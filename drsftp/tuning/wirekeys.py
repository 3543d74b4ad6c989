"""The DRS command's keys, sans-IO: each report pair's name, written once
(docs/PROTOCOL.md, "Keys" and "DRS in extended block mode").

The grammar (drsftp/ftp/drscmd.py), one session's sums and shares
(drsftp/ftp/drsexchange.py), a third-party copy's relay (drsftp/ftp/relay.py),
our own report (tuning/controller.py), the path the senders report
(tuning/count/sharing.py), the server's DRS replies (server/ftp) and the
client's requests and copy results (client/) all name the keys from here;
tests/test_wirekeys.py finds a key written anywhere else.
"""

from __future__ import annotations

RTT_US = "rtt_us"  # microseconds: smoothed TCP RTT
CWND = "cwnd"  # bytes: a sender's congestion window
INFLIGHT = "inflight"  # bytes: sent and not yet acknowledged
WND = "wnd"  # bytes: the receive window a receiver allows from now on
RATE = "rate"  # bytes/s over the last tick
BYTES = "bytes"  # cumulative: acknowledged (sender) or received (receiver)
RCVBUF = "rcvbuf"  # SO_RCVBUF as read back
SNDBUF = "sndbuf"  # SO_SNDBUF as read back
RETRANS = "retrans"  # segments: tcpi_total_retrans
STREAMS = "streams"  # MODE E: streams in use; from a client, the streams it asks for
BUSY_US = "busy_us"  # microseconds: a sender's busy time (tcpi_busy_time)
RWND_LIM_US = "rwnd_lim_us"  # ... of it, limited by the receive window
SNDBUF_LIM_US = "sndbuf_lim_us"  # ... of it, limited by the send buffer

# a reply's pairs with nothing measured yet (no tuner report): one pair of a
# key no peer reads, since unknown keys are ignored (docs/PROTOCOL.md, "Keys")
NOTHING_MEASURED = {"role": 0}

# a sender's limited-time keys -> its struct tcp_info fields (tuning/count/sharing.py)
LIMIT_KEYS = {BUSY_US: "busy_time", RWND_LIM_US: "rwnd_limited", SNDBUF_LIM_US: "sndbuf_limited"}
LIMIT_BOUND = 1 << 50  # microseconds (35 years): a sane value's upper bound on the wire

# key -> (PeerReport field, scale to SI units, upper bound of a sane value)
FIELDS = {
    RTT_US: ("rtt", 1e-6, 60_000_000),  # up to 60 s
    CWND: ("cwnd", 1, 1 << 34),  # bytes, up to 16 GiB
    INFLIGHT: ("inflight", 1, 1 << 34),
    WND: ("window", 1, 1 << 34),
    RATE: ("rate", 1, 1 << 40),  # bytes/s, ~8.8 Tbit/s
    BYTES: ("bytes", 1, 1 << 62),
}

# keys that are no PeerReport field, with their bounds
EXTRA_BOUNDS = {
    STREAMS: 1 << 16,
    **dict.fromkeys(LIMIT_KEYS, LIMIT_BOUND),
}

# MODE E: a session's report sums these over its streams (rtt_us: the least) ...
SUMMED = (BYTES, RATE, WND, INFLIGHT, CWND, RCVBUF, SNDBUF, RETRANS, *LIMIT_KEYS)
# ... and the receiving end splits these of the peer's sums over its own streams
SHARED = (BYTES, RATE, WND, INFLIGHT, CWND)
