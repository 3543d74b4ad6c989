"""The per-socket controller, sans-IO: synthetic TCP_INFO snapshots in,
socket actions out (docs/DESIGN.md#socket-controller).  No sockets."""

import dataclasses

import pytest

from drsftp.tuning import NO_CHANGE, Decision, Role, Tuning
from drsftp.tuning.actuation import NO_ACTION, HostLimits, SocketActions, rtt_from_info
from drsftp.tuning.budget import BufferBudget
from drsftp.tuning.controller import SocketController

KiB, MiB = 1024, 1024 * 1024
# stock: autotuning reaches no further than setsockopt (tcp_rmem max <= 2 x rmem_max)
STOCK = HostLimits(rmem_max=8 * MiB, wmem_max=8 * MiB, tcp_rmem=(4096, 131072, 6 * MiB),
                   tcp_wmem=(4096, 16384, 4 * MiB), congestion_control="cubic", can_force=False)
# ESnet-tuned: autotuning may grow a buffer to 64 MiB, setsockopt only to 2 x 4 MiB
TUNED = HostLimits(rmem_max=4 * MiB, wmem_max=4 * MiB, tcp_rmem=(4096, 131072, 64 * MiB),
                   tcp_wmem=(4096, 16384, 64 * MiB), congestion_control="bbr", can_force=False)
FORCE = HostLimits(rmem_max=1 * MiB, wmem_max=1 * MiB, tcp_rmem=None, tcp_wmem=None,
                   congestion_control=None, can_force=True)


def snapshot(received=0, acked=0, rcv_rtt_ms=None, rtt_ms=None, **kw):
    info = {"snd_mss": 1448, "bytes_received": received, "bytes_acked": acked, **kw}
    if rcv_rtt_ms is not None:
        info["rcv_rtt"] = int(rcv_rtt_ms * 1000)
    if rtt_ms is not None:
        info["rtt"] = int(rtt_ms * 1000)
    return info


class Scripted(Tuning):
    """A strategy that returns the decisions it is given, one per sample."""

    name = "scripted"

    def __init__(self, role, decisions):
        super().__init__(role)
        self.decisions = iter(decisions)

    def on_sample(self, sample, *, now, rtt):
        return next(self.decisions)

    def tick_interval(self, *, rtt):
        return 0.02


def scripted(role, decisions, **kw):
    ctl = SocketController("kernel", role, limits=kw.pop("limits", STOCK), **kw)
    ctl.tuning = Scripted(role, decisions)
    ctl.attach(now=0.0)
    return ctl


# -- who owns the buffer ---------------------------------------------------------------
def test_a_receiver_sets_the_receive_buffer_and_clamp_and_only_a_small_send_buffer():
    ctl = SocketController("drs", Role.RECEIVER, limits=STOCK)
    assert ctl.attach(now=0.0) == NO_ACTION and ctl.kernel_owns is None
    first = ctl.tick(snapshot(rcv_rtt_ms=50), 0, now=0.0)  # no rate yet: DRS's floor
    assert (first.rcvbuf, first.clamp, first.sndbuf) == (int(256 * KiB * 0.8), 256 * KiB, 16 * KiB)
    assert first.notsent_lowat is None and first.rcvlowat is None  # 1/8 of 256 KiB: under the batch minimum


def test_a_sender_sets_the_send_buffer_and_its_unsent_allowance_and_a_small_receive_buffer():
    ctl = SocketController("drs", Role.SENDER, limits=STOCK)
    ctl.attach(now=0.0)
    first = ctl.tick(snapshot(rtt_ms=50), 0, now=0.0)
    assert (first.sndbuf, first.notsent_lowat) == (256 * KiB, 256 * KiB)
    assert (first.rcvbuf, first.clamp) == (int(16 * KiB * 0.8), 16 * KiB)  # the ACK direction


@pytest.mark.parametrize("role", [Role.RECEIVER, Role.SENDER])
def test_where_autotuning_reaches_further_the_data_direction_is_left_to_it(role):
    limits = dataclasses.replace(TUNED, tcp_rmem=(4096, 131072, 32 * MiB))
    ctl = SocketController("drs", role, limits=limits)
    ctl.control_rtt = 0.1  # a long path: DRS would open-start
    assert ctl.kernel_owns == ("rcvbuf" if role is Role.RECEIVER else "sndbuf")
    assert ctl.before_handshake() == NO_ACTION  # (a receiver's open start would lock the buffer)
    ctl.attach(now=0.0)
    t, got, lowats = 0.0, 0, []
    for _ in range(6):
        t, got = t + 0.1, got + 2 * MiB
        acts = ctl.tick(snapshot(received=got, acked=got, rcv_rtt_ms=100, rtt_ms=100, snd_cwnd=2000), got, now=t)
        if role is Role.RECEIVER:
            assert acts.rcvbuf is None and acts.clamp == ctl.tuning.window  # the window by the clamp alone, each tick
            assert acts.sndbuf is None or acts.sndbuf == 16 * KiB  # the ACK direction's buffer is still set
        else:
            assert acts.sndbuf is None  # memory the kernel's; the unsent data bounded instead
            assert acts.rcvbuf is None or acts.rcvbuf == int(16 * KiB * 0.8)
            if acts.notsent_lowat is not None:
                lowats.append((acts.notsent_lowat, ctl.tuning.notsent, ctl.tuning.window))
    if role is Role.SENDER:
        assert lowats and all(lowat == max(notsent, 64 * KiB) and notsent <= window
                              for lowat, notsent, window in lowats), lowats
    # the clamp's memory ceiling (tcp_rmem max) caps a receiver; a sender keeps DRS's own cap
    assert ctl.tuning.config.cap == (32 * MiB if role is Role.RECEIVER else 64 * MiB)


def test_an_sbuf_caps_drs_whoever_owns_the_buffer():
    ctl = SocketController("drs", Role.RECEIVER, limits=TUNED)
    ctl.cap_size(2 * MiB)
    assert ctl.kernel_owns == "rcvbuf" and ctl.tuning.config.cap == 2 * MiB
    ctl = SocketController("drs", Role.RECEIVER, limits=STOCK)
    ctl.cap_size(2 * MiB)
    assert ctl.kernel_owns is None and ctl.tuning.config.cap == 2 * MiB


def test_a_fixed_or_kernel_tuning_owns_nothing_and_is_not_capped():
    for spec in ("fixed:1MiB", "kernel"):
        assert SocketController(spec, Role.RECEIVER, limits=TUNED).kernel_owns is None


# -- the RTT artefact filter -------------------------------------------------------------
def test_a_data_rtt_far_below_the_control_paths_is_replaced_by_it():
    ctl = SocketController("drs", Role.RECEIVER, limits=STOCK)
    ctl.note_control_rtt(100_000)  # tcpi_rtt of the control connection, microseconds
    ctl.note_control_rtt(120_000)  # the least is kept
    assert ctl.control_rtt == 0.1
    ctl.attach(now=0.0)
    ctl.tick(snapshot(received=1000, rcv_rtt_ms=0.3), 1000, now=0.0)  # rcv_rtt's first samples
    assert ctl.last_rtt == 0.1 and ctl.tuning.rtt.min_rtt == 0.1
    ctl.tick(snapshot(received=1500, rcv_rtt_ms=45), 1500, now=0.05)  # under half of it: still an artefact
    assert ctl.last_rtt == 0.1 and ctl.tuning.rtt.min_rtt == 0.1
    ctl.tick(snapshot(received=2000, rcv_rtt_ms=60), 2000, now=0.1)  # half the control RTT or more: believed
    assert ctl.last_rtt == 0.06 and ctl.tuning.rtt.min_rtt == 0.06
    ctl.tick(snapshot(received=3000), 3000, now=0.2)  # no sample at all: the control RTT
    assert ctl.last_rtt == 0.1


def test_rtt_sources_per_role():
    info = snapshot(rcv_rtt_ms=30, rtt_ms=40, acked=100)
    assert (rtt_from_info(info, True), rtt_from_info(info, False)) == (0.03, 0.04)
    assert rtt_from_info(snapshot(rtt_ms=40, acked=100), True) == 0.04  # no rcv_rtt: srtt, once data was acked
    assert rtt_from_info(snapshot(rtt_ms=40, acked=1), True) is None  # the SYN only
    assert rtt_from_info(snapshot(), False) is None


# -- the memory held for an offered window ------------------------------------------------
def test_a_shrinking_receive_buffer_is_held_for_the_window_already_offered():
    big, small = Decision(rcv_window=2 * MiB, sndbuf=16 * KiB), Decision(rcv_window=512 * KiB)
    ctl = scripted(Role.RECEIVER, [Decision(rcv_window=256 * KiB), big, small, NO_CHANGE, NO_CHANGE, NO_CHANGE],
                   limits=FORCE, allow_force=True)
    acts = [ctl.tick(snapshot(rcv_wnd=offer), 0, now=0.01 * i)
            for i, offer in enumerate([3 * MiB, 3 * MiB, 1800 * KiB, 2500 * KiB, 900 * KiB, 400 * KiB])]
    assert acts[0].rcvbuf == int(256 * KiB * 0.8) and not ctl.plan.holding  # the open start's offer is no flight
    assert acts[1].rcvbuf == int(2 * MiB * 0.8)
    assert (acts[2].clamp, acts[2].rcvbuf) == (512 * KiB, int(1800 * KiB * 0.8))  # the clamp at once, memory held
    # "no change" from the strategy: the held buffer is brought down as the offer drains, never up
    assert acts[3].rcvbuf == int(1800 * KiB * 0.8)
    assert acts[4].rcvbuf == int(900 * KiB * 0.8)
    assert acts[5].rcvbuf == int(512 * KiB * 0.8) and ctl.plan.held_memory() == 0
    assert all(a.force for a in acts)


def test_a_budget_counts_the_held_memory_of_an_offered_window():
    budget = BufferBudget(64 * MiB)
    ctl = scripted(Role.RECEIVER, [Decision(rcv_window=2 * MiB), Decision(rcv_window=512 * KiB), NO_CHANGE],
                   budget=budget)
    ctl.tick(snapshot(rcv_wnd=2 * MiB), 0, now=0.0)
    assert budget.granted_total() == int(2 * MiB * 0.8 * 2)
    ctl.tick(snapshot(rcv_wnd=1800 * KiB), 0, now=0.01)  # the decision shrinks; 1.8 MiB offered stays held
    held = int(1800 * KiB * 0.8 * 2)
    assert ctl.plan.held_memory() == held
    ctl.tick(snapshot(rcv_wnd=1800 * KiB), 0, now=0.02)  # the next grant pins it: the other flows see it taken
    assert budget.granted_total() == held


def test_only_what_changed_is_set():
    ctl = scripted(Role.SENDER, [Decision(rcv_window=16 * KiB, sndbuf=256 * KiB),
                                 Decision(rcv_window=16 * KiB, sndbuf=512 * KiB),
                                 Decision(rcv_window=16 * KiB, sndbuf=512 * KiB)])
    a, b, c = (ctl.tick(snapshot(), 0, now=i * 0.01) for i in range(3))
    assert a.rcvbuf is not None and a.sndbuf == 256 * KiB
    assert (b.rcvbuf, b.clamp, b.sndbuf) == (None, None, 512 * KiB)
    assert c.is_empty() and c.next_tick == 0.02


# -- open start vs parallel -------------------------------------------------------------------
def test_open_start_offers_the_cap_then_locks_the_floor_on_long_paths_only():
    ctl = SocketController("drs", Role.RECEIVER, limits=STOCK)
    ctl.control_rtt = 0.1
    opened = ctl.before_handshake()
    cap = int(STOCK.rmem_max / 0.8)  # the window setsockopt can give here
    assert opened.rcvbuf == cap and opened.clamp is None and ctl.handshake_window == cap
    locked = ctl.after_handshake()
    assert (locked.rcvbuf, locked.clamp) == (int(256 * KiB * 0.8), 256 * KiB)
    assert ctl.static_window is None  # a decision followed: no fixed read batch
    short = SocketController("drs", Role.RECEIVER, limits=STOCK)
    short.control_rtt = 0.005
    assert short.before_handshake() == NO_ACTION and short.after_handshake() == NO_ACTION
    closed = SocketController("drs-closed", Role.RECEIVER, limits=STOCK)
    closed.control_rtt = 0.1
    assert closed.before_handshake() == NO_ACTION


def test_one_of_n_parallel_streams_keeps_drs_and_its_open_start_where_autotuning_reaches_further():
    alone = SocketController("drs", Role.RECEIVER, limits=TUNED)
    one_of_n = SocketController("drs", Role.RECEIVER, limits=TUNED, parallel=True)
    for c in (alone, one_of_n):
        c.control_rtt = 0.1
    assert alone.kernel_owns == "rcvbuf" and alone.before_handshake() == NO_ACTION
    assert one_of_n.kernel_owns is None
    assert one_of_n.before_handshake().rcvbuf == 5 * MiB  # 1.25 x rmem_max, set before the handshake


def test_a_fixed_buffer_batches_reads_from_its_handshake_window():
    ctl = SocketController("fixed:4MiB", Role.RECEIVER, limits=STOCK)
    assert ctl.before_handshake() == SocketActions(rcvbuf=4 * MiB, sndbuf=4 * MiB)
    assert ctl.after_handshake() == NO_ACTION and ctl.static_window == 4 * MiB
    assert ctl.attach(now=0.0) == SocketActions(rcvlowat=512 * KiB)
    tls = SocketController("fixed:4MiB", Role.RECEIVER, limits=STOCK, batch_reads=False)
    tls.handshake_window = 4 * MiB
    assert tls.attach(now=0.0).rcvlowat is None


# -- the CPU floor below 10 ms -------------------------------------------------------------------
@pytest.mark.parametrize("rtt_ms,floored", [(5, True), (20, False)])
def test_short_paths_get_a_4_mib_window_for_read_batching(rtt_ms, floored):
    ctl = SocketController("drs", Role.RECEIVER, limits=STOCK)
    ctl.attach(now=0.0)
    rate = 25e6  # bytes/s: a right-sized window of ~rate x max(rtt, 10 ms), far under 4 MiB
    t, got, acts = 0.0, 0, []
    for _ in range(40):
        t += 0.01
        got += int(rate * 0.01)
        acts.append(ctl.tick(snapshot(received=got, rcv_rtt_ms=rtt_ms), got, now=t))
    window = ctl.tuning.window
    if floored:
        assert window == 4 * MiB and any(a.clamp == 4 * MiB and a.rcvlowat == 512 * KiB for a in acts)
    else:
        assert window < 2 * MiB


# -- budget claims ------------------------------------------------------------------------------
def test_a_buffer_left_to_autotuning_is_claimed_whole_or_drs_sets_buffers_within_a_share():
    budget = BufferBudget(256 * MiB)
    first = SocketController("drs", Role.RECEIVER, limits=TUNED, budget=budget)
    second = SocketController("drs", Role.RECEIVER, limits=TUNED, budget=budget)
    assert first.kernel_owns and second.kernel_owns  # both could, when made
    first.attach(now=0.0)
    assert first.kernel_owns == "rcvbuf" and budget.share(first.key) == 64 * MiB
    budget.limit("other", Decision(rcv_window=100 * MiB))  # fills what is left past the claim
    second.attach(now=0.0)
    assert second.kernel_owns is None and second.tuning.config.cap == int(TUNED.rmem_max / 0.8)
    acts = second.tick(snapshot(rcv_rtt_ms=50), 0, now=0.0)
    assert acts.rcvbuf is not None  # within its share now
    first.close({})
    assert first.key not in budget._flows
    small = SocketController("drs", Role.RECEIVER, limits=TUNED, budget=BufferBudget(64 * MiB))
    assert small.kernel_owns is None  # a 64 MiB claim needs twice that free


def test_budget_shares_reach_the_socket_and_the_unsent_allowance_passes_through():
    budget = BufferBudget(1 * MiB)
    ctl = scripted(Role.SENDER, [Decision(rcv_window=16 * KiB, sndbuf=4 * MiB, notsent=300 * KiB)], budget=budget)
    acts = ctl.tick(snapshot(), 0, now=0.0)
    assert acts.notsent_lowat == 300 * KiB
    assert acts.sndbuf is not None and 2 * acts.sndbuf <= 1 * MiB  # kernel memory within the budget


def test_the_open_starts_handshake_buffer_is_reserved_and_released():
    budget = BufferBudget(64 * MiB)
    ctl = SocketController("drs", Role.RECEIVER, limits=STOCK, budget=budget)
    ctl.control_rtt = 0.1
    key = object()
    opened = ctl.before_handshake(reserve_as=key)
    assert opened.rcvbuf == int(STOCK.rmem_max / 0.8) and budget.granted_total() == 2 * opened.rcvbuf
    ctl.after_handshake(reserved_as=key)
    assert budget.granted_total() == 0
    tiny = BufferBudget(256 * KiB)  # half of it free is below DRS's 256 KiB floor (held 2x)
    ctl = SocketController("drs", Role.RECEIVER, limits=STOCK, budget=tiny)
    ctl.control_rtt = 0.1
    assert ctl.before_handshake(reserve_as=key) == NO_ACTION and tiny.granted_total() == 0


def test_a_sender_closing_with_data_queued_holds_it_until_drained():
    budget = BufferBudget(64 * MiB)
    ctl = scripted(Role.SENDER, [Decision(sndbuf=8 * MiB)], budget=budget)
    ctl.tick(snapshot(rtt_ms=50), 0, now=0.0)
    drain = ctl.close(snapshot(notsent_bytes=1 * MiB, unacked=100))
    queued = 1 * MiB + 100 * 1448
    assert budget.granted_total() == 2 * queued
    # at the floor rate of 64 KiB/s, plus two RTTs (the control RTT is unknown: 50 ms measured)
    assert drain == pytest.approx(queued / (64 * KiB) + 2 * 0.05)
    ctl.release()
    assert budget.granted_total() == 0
    receiver = scripted(Role.RECEIVER, [Decision(rcv_window=1 * MiB)], budget=budget)
    receiver.tick(snapshot(), 0, now=0.0)
    assert receiver.close(snapshot(notsent_bytes=1000)) is None and budget.granted_total() == 0


# -- host limits --------------------------------------------------------------------------------------
def test_a_buffer_cut_by_rmem_max_is_reported_once_and_the_buffer_binds_not_the_clamp():
    at_cap = int(STOCK.rmem_max / 0.8)
    ctl = scripted(Role.RECEIVER, [Decision(rcv_window=4 * at_cap), Decision(rcv_window=at_cap // 2),
                                   Decision(rcv_window=4 * at_cap)])
    a, b, c = (ctl.tick(snapshot(), 0, now=i * 0.01) for i in range(3))
    assert a.capped == ("rmem_max",) and a.clamp == 2 * STOCK.rmem_max
    assert b.clamp == at_cap // 2 and c.capped == ()  # warned once


def test_force_is_asked_while_allowed_and_dropped_once_refused():
    ctl = scripted(Role.RECEIVER, [Decision(rcv_window=4 * MiB), Decision(rcv_window=2 * MiB)],
                   limits=FORCE, allow_force=True)
    first = ctl.tick(snapshot(), 0, now=0.0)
    assert first.force and first.rcvbuf == int(4 * MiB * 0.8) and first.clamp == 4 * MiB and first.capped == ()
    ctl.force_refused()
    assert not ctl.tick(snapshot(), 0, now=0.01).force
    assert not SocketController("drs", Role.RECEIVER, limits=STOCK, allow_force=True).allow_force  # no CAP_NET_ADMIN


def test_a_receivers_report_offers_the_larger_of_its_window_and_the_kernels():
    ctl = SocketController("drs", Role.RECEIVER, limits=STOCK)
    ctl.attach(now=0.0)
    ctl.tick(snapshot(rcv_rtt_ms=50), 0, now=0.0)
    pairs = ctl.report(snapshot(received=5000, rcv_ssthresh=3 * MiB), (1, 2))
    assert (pairs["wnd"], pairs["bytes"], pairs["rcvbuf"], pairs["sndbuf"]) == (3 * MiB, 5000, 1, 2)
    assert pairs["rtt_us"] == 50_000 and pairs["cwnd"] is None
