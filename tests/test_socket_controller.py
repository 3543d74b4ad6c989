"""The per-socket controller, sans-IO: synthetic TCP_INFO snapshots in,
socket actions out (docs/DESIGN.md#socket-controller).  No sockets."""

import dataclasses

import pytest

from drsftp.tuning import NO_CHANGE, Decision, Role, Tuning
from drsftp.tuning.actuation import (
    NO_ACTION,
    BufferPlan,
    HostLimits,
    SocketActions,
    autotuning_reaches_further,
    from_kernel_memory,
    host_cap,
    kernel_memory,
    queued_bytes,
    rtt_from_info,
    sample_from_info,
)
from drsftp.tuning.budget import BufferBudget
from drsftp.tuning.controller import SocketController, SocketStats

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
    if kw.get("budget") is not None:
        decisions = [NO_CHANGE, *decisions]  # the first decision, at attach under a budget: none
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
def can_hold(actions, limits):
    """Kernel memory a socket may hold after ``actions`` (`ss` rb + tb): a
    buffer value V set is 2 V; a buffer never set is the kernel's to
    autotune, up to tcp_rmem/tcp_wmem max."""
    rcv = next((a.rcvbuf for a in reversed(actions) if a.rcvbuf is not None), None)
    snd = next((a.sndbuf for a in reversed(actions) if a.sndbuf is not None), None)
    return (2 * rcv if rcv else limits.tcp_rmem[2]) + (2 * snd if snd else limits.tcp_wmem[2])


@pytest.mark.parametrize("role", [Role.RECEIVER, Role.SENDER])
def test_under_a_budget_a_socket_holds_nothing_outside_it_from_attach_on(role):
    """The budget rule holds for a socket from attach, before its first
    tick, which a loaded server's event loop may delay while the transfer
    runs: its buffers are set within a grant at once, where before that
    tick they were the kernel's to autotune past any grant.  The flows that
    fill the budget and the newcomer together hold no more than the budget
    and the newcomer's floors (docs/DESIGN.md#budget)."""
    budget = BufferBudget(16 * MiB)
    flows = [scripted(Role.RECEIVER, [Decision(rcv_window=4 * MiB, sndbuf=16 * KiB)] * 3, budget=budget)
             for _ in range(4)]
    held: list[list[SocketActions]] = [[] for _ in flows]
    for t in (0.0, 0.05, 0.1):  # their first ticks, and those that settle the shares
        for ctl, acts in zip(flows, held, strict=True):
            acts.append(ctl.tick(snapshot(rcv_rtt_ms=10), 0, now=t))
    assert budget.granted_total() > 16 * MiB - 64 * KiB  # full
    late = SocketController("drs", role, limits=STOCK, budget=budget)
    first = late.attach(now=0.2)
    assert first.rcvbuf is not None and first.sndbuf is not None  # both set: no autotuning
    total = sum(can_hold(acts, STOCK) for acts in held) + can_hold([first], STOCK)
    assert total <= budget.total + 2 * 64 * KiB, total


def test_a_buffer_left_to_autotuning_is_claimed_whole_or_drs_sets_buffers_within_a_share():
    budget = BufferBudget(256 * MiB)
    first = SocketController("drs", Role.RECEIVER, limits=TUNED, budget=budget)
    second = SocketController("drs", Role.RECEIVER, limits=TUNED, budget=budget)
    assert first.kernel_owns and second.kernel_owns  # both could, when made
    first.attach(now=0.0)
    assert first.kernel_owns == "rcvbuf" and budget.share(first.key) == 64 * MiB
    budget.limit("other", Decision(rcv_window=100 * MiB))  # fills what is left past the claim
    acts = second.attach(now=0.0, info=snapshot(rcv_rtt_ms=50))
    assert second.kernel_owns is None and second.tuning.config.cap == int(TUNED.rmem_max / 0.8)
    assert acts.rcvbuf is not None  # within its share now, from attach
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


# -- the pure helpers, exactly (the mutation run's fast tests: docs/MUTATION.md) ----------------
def test_tcp_info_readers():
    info = {"snd_mss": 1000, "snd_cwnd": 10, "sacked": 3, "lost": 2, "bytes_received": 5, "snd_wnd": 7}
    s = sample_from_info(info)
    assert (s.cwnd_bytes, s.held_bytes, s.bytes_received, s.bytes_acked, s.peer_window) == (10000, 5000, 5, 0, 7)
    empty = sample_from_info({})
    assert (empty.bytes_received, empty.bytes_acked, empty.cwnd_bytes, empty.held_bytes) == (0, 0, None, None)
    assert sample_from_info({"snd_cwnd": 10, "lost": 1, "sacked": 1}).cwnd_bytes is None  # no mss: unknown
    assert sample_from_info({}, 42).bytes_received == 42  # where TCP_INFO lacks the count
    assert rtt_from_info({"rtt": 40_000, "bytes_acked": 2}, True) == 0.04
    assert queued_bytes({}) == 0
    assert queued_bytes({"notsent_bytes": 5, "snd_mss": 1000}) == 5
    assert queued_bytes({"unacked": 2}) == 0  # no mss: nothing known in flight
    assert queued_bytes({"notsent_bytes": 5, "unacked": 2, "snd_mss": 1000}) == 2005


def test_kernel_memory_and_host_limits():
    assert kernel_memory(Decision(rcv_window=1000, sndbuf=1000)) == Decision(rcv_window=1600, sndbuf=2000)
    assert from_kernel_memory(Decision(rcv_window=1600, sndbuf=2001)) == Decision(rcv_window=1000, sndbuf=1000)
    assert host_cap(STOCK, False, True) == int(8 * MiB / 0.8) and host_cap(STOCK, False, False) == 8 * MiB
    assert host_cap(STOCK, True, True) == int(8 * MiB / 0.8)  # FORCE asked, not available
    assert host_cap(FORCE, False, True) == int(1 * MiB / 0.8) and host_cap(FORCE, True, True) is None
    forced = dataclasses.replace(TUNED, can_force=True)
    assert autotuning_reaches_further(forced, False, True) and not autotuning_reaches_further(forced, True, True)
    assert autotuning_reaches_further(TUNED, True, True)  # FORCE asked, not available
    edge = dataclasses.replace(TUNED, tcp_rmem=(4096, 131072, 8 * MiB))  # exactly 2 x rmem_max: no further
    assert not autotuning_reaches_further(edge, False, True)
    assert autotuning_reaches_further(dataclasses.replace(edge, tcp_rmem=(4096, 131072, 8 * MiB + 1)), False, True)
    assert STOCK.as_dict()["net.ipv4.tcp_rmem"] == [4096, 131072, 6 * MiB]
    assert FORCE.as_dict()["net.ipv4.tcp_wmem"] == []
    with pytest.raises(dataclasses.FrozenInstanceError):
        STOCK.rmem_max = 1  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        NO_ACTION.rcvbuf = 1  # type: ignore[misc]


def test_a_plans_options_at_their_bounds():
    plan = BufferPlan(STOCK)
    acts = plan.actions(Decision(rcv_window=512 * KiB + 1, sndbuf=100, notsent=1000))
    assert (acts.rcvlowat, acts.sndbuf, acts.notsent_lowat, acts.force) == (64 * KiB, 4096, 64 * KiB, False)
    assert plan.actions(Decision(rcv_window=8 * MiB)).rcvlowat == 512 * KiB
    assert plan.actions(Decision(rcv_window=512 * KiB - 8)).rcvlowat == 1  # under 64 KiB: the default
    assert plan.held_memory() == 0 and not plan.holding
    at_cap = int(STOCK.rmem_max / 0.8)  # SO_RCVBUF exactly rmem_max: the buffer binds, uncut
    acts = plan.actions(Decision(rcv_window=at_cap))
    assert (acts.rcvbuf, acts.clamp, plan.capped) == (STOCK.rmem_max, 2 * STOCK.rmem_max, [])
    unknown = BufferPlan(dataclasses.replace(STOCK, rmem_max=None, wmem_max=None))  # no sysctls (not Linux)
    acts = unknown.actions(Decision(rcv_window=64 * MiB, sndbuf=64 * MiB))
    assert (acts.clamp, acts.sndbuf, unknown.capped) == (64 * MiB, 64 * MiB, [])


def test_a_held_buffer_past_rmem_max_keeps_the_clamp_at_the_window():
    limits = dataclasses.replace(STOCK, rmem_max=1 * MiB)
    plan = BufferPlan(limits)
    plan.actions(Decision(rcv_window=2 * MiB), offered=2 * MiB)
    acts = plan.actions(Decision(rcv_window=1 * MiB), offered=2 * MiB)  # the memory held for 2 MiB: at the cap
    assert (acts.rcvbuf, acts.clamp) == (int(2 * MiB * 0.8), 1 * MiB)  # the window itself is under it


def test_stats_rate_and_timeline():
    st = SocketStats()
    assert (st.rtt_avg, st.retransmits, st.rtt_n) == (None, 0, 0)
    for rtt in (0.03, 0.01, 0.02, None):
        st.add_rtt(rtt)
    assert (st.rtt_min, st.rtt_max, st.rtt_n) == (0.01, 0.03, 3) and st.rtt_avg == pytest.approx(0.02)
    ctl = SocketController("kernel", Role.RECEIVER, limits=STOCK)
    ctl.attach(now=0.0)
    assert ctl.report({}, None)["rate"] == 0.0
    first = ctl.tick(snapshot(received=1000), 0, now=0.0)
    assert first.next_tick == 0.25  # the strategy names no interval
    for t in (0.01, 0.03):
        ctl.tick(snapshot(received=2000), 0, now=t)  # under the rate's span (50 ms): no new rate yet
        assert ctl.rate == 0.0
    ctl.tick(snapshot(received=6000), 0, now=0.05)  # exactly the span
    assert ctl.rate == pytest.approx(5000 / 0.05)
    ctl.record(0.25, 10, 20)
    row = ctl.stats.timeline[-1]
    assert row == {"t": 0.25, "bytes": 6000, "rate_bps": round(5000 / 0.05 * 8), "rtt_ms": None, "window": None,
                   "rcvbuf": 10, "sndbuf": 20, "cwnd": 0, "in_flight": 0, "peer_window": None}
    sender = SocketController("kernel", Role.SENDER, limits=STOCK)
    sender.attach(now=0.0)
    sender.tick(snapshot(acked=1000, rtt_ms=12.3456, snd_cwnd=10, unacked=4), 5, now=0.0)
    sender.tick(snapshot(acked=3000, rtt_ms=12.3456, snd_cwnd=10, unacked=4), 5, now=0.1)
    assert sender.rate == pytest.approx(20000)  # the acked bytes, not the moved count
    sender.record(0.12344, 0, 0)
    row = sender.stats.timeline[-1]
    assert (row["t"], row["rtt_ms"], row["cwnd"], row["in_flight"]) == (0.1234, 12.345, 14480, 5792)
    sender.last_info = {"snd_cwnd": 10}
    sender.record(0.2, 0, 0)
    assert sender.stats.timeline[-1]["cwnd"] is None  # no mss: unknown
    for _ in range(20_000 - len(sender.stats.timeline)):
        sender.record(0.3, 0, 0)
    assert sender.timeline_full
    sender.record(0.4, 0, 0)
    assert len(sender.stats.timeline) == 20_000


def test_a_senders_stats_take_its_own_srtt_and_the_filter_boundary():
    ctl = SocketController("drs", Role.SENDER, limits=STOCK)
    ctl.control_rtt = 0.1
    ctl.attach(now=0.0)
    ctl.tick(snapshot(acked=10, rtt_ms=30), 0, now=0.0)  # under half the control RTT: not DRS's
    assert ctl.last_rtt == 0.1 and ctl.stats.rtt_min == 0.03  # but the report's RTT is the kernel's srtt
    ctl.tick(snapshot(acked=10), 0, now=0.01)  # none at all: the control RTT
    assert ctl.stats.rtt_max == 0.1
    receiver = SocketController("drs", Role.RECEIVER, limits=STOCK)
    receiver.control_rtt = 0.1
    receiver.attach(now=0.0)
    receiver.tick(snapshot(rcv_rtt_ms=50), 0, now=0.0)  # exactly half: believed
    assert receiver.last_rtt == 0.05


def test_reports_per_role():
    sender = SocketController("drs", Role.SENDER, limits=STOCK)
    sender.control_rtt = 0.1
    sender.attach(now=0.0)
    sender.tick(snapshot(acked=10), 0, now=0.0)
    pairs = sender.report(snapshot(acked=10, rtt_ms=40, snd_cwnd=10, unacked=4), (1, 2))
    assert (pairs["rtt_us"], pairs["cwnd"], pairs["inflight"], pairs["wnd"]) == (40_000, 14480, 5792, None)
    assert sender.report(snapshot(acked=10), None)["rtt_us"] == 100_000  # the filtered RTT, where TCP_INFO has none
    assert sender.report({"snd_cwnd": 10, "unacked": 4}, None)["cwnd"] is None  # no mss: unknown
    pairs = sender.report({"snd_mss": 1448}, None)
    assert (pairs["cwnd"], pairs["inflight"]) == (0, 0)
    drs = SocketController("drs", Role.RECEIVER, limits=STOCK)
    drs.attach(now=0.0)
    drs.tick(snapshot(rcv_rtt_ms=50), 0, now=0.0)
    assert drs.report(snapshot(rcv_ssthresh=100 * KiB), None)["wnd"] == 256 * KiB  # DRS's window, the larger
    kernel = SocketController("kernel", Role.RECEIVER, limits=STOCK)
    kernel.attach(now=0.0)
    pairs = kernel.report(snapshot(received=9, unacked=4), (300, 20))
    assert (pairs["wnd"], pairs["inflight"], pairs["cwnd"], pairs["bytes"]) == (300, None, None, 9)


def test_ownership_follows_each_directions_limits_and_claims_its_maximum():
    wmem_short = dataclasses.replace(TUNED, tcp_wmem=(4096, 16384, 8 * MiB))  # send side: setsockopt reaches
    assert SocketController("drs", Role.RECEIVER, limits=wmem_short).kernel_owns == "rcvbuf"
    assert SocketController("drs", Role.SENDER, limits=wmem_short).kernel_owns is None
    split = dataclasses.replace(TUNED, tcp_wmem=(4096, 16384, 32 * MiB))
    for role, claim in ((Role.RECEIVER, 64 * MiB), (Role.SENDER, 32 * MiB)):
        budget = BufferBudget(256 * MiB)
        ctl = SocketController("drs", role, limits=split, budget=budget)
        ctl.attach(now=0.0)
        assert budget.share(ctl.key) == claim
    assert not SocketController("drs", Role.RECEIVER, limits=FORCE).allow_force  # not asked


def test_the_handshake_reservation_at_its_edges():
    key = object()
    exact = SocketController("drs", Role.RECEIVER, limits=STOCK, budget=BufferBudget(1 * MiB))
    exact.control_rtt = 0.1
    assert exact.before_handshake(reserve_as=key).rcvbuf == 256 * KiB  # the floor exactly: still an open start
    odd = SocketController("drs", Role.RECEIVER, limits=STOCK, budget=BufferBudget(4 * MiB + 6))
    odd.control_rtt = 0.1
    odd.before_handshake(reserve_as=key)
    assert odd.handshake_window == 1 * MiB + 1  # half of the (2 MiB + 3) granted, in whole bytes
    crumbs = SocketController("fixed:1MiB", Role.RECEIVER, limits=STOCK, budget=BufferBudget(4))
    assert crumbs.before_handshake(reserve_as=key).rcvbuf == 4096  # a fixed size takes what there is
    free = SocketController("drs", Role.RECEIVER, limits=STOCK)
    free.control_rtt = 0.1
    free.before_handshake(reserve_as=key)
    free.after_handshake(reserved_as=key)  # no budget: nothing to release


def test_a_fresh_socket_holds_nothing_and_re_applies_nothing():
    ctl = SocketController("drs", Role.RECEIVER, limits=STOCK)
    ctl.control_rtt = 0.1
    ctl.after_handshake()  # the open start's lock: an applied decision
    ctl.tuning = Scripted(Role.RECEIVER, [NO_CHANGE])
    ctl.attach(now=0.0)
    assert ctl.tick(snapshot(rcv_wnd=4 * MiB), 0, now=0.0).is_empty()


def test_a_closed_senders_drain_time():
    budget = BufferBudget(1 << 40)
    fast = scripted(Role.SENDER, [Decision(sndbuf=8 * MiB)] * 3, budget=budget)
    fast.tick(snapshot(acked=0), 0, now=0.0)
    fast.tick(snapshot(acked=10 * MiB), 0, now=0.1)
    assert fast.close(snapshot(notsent_bytes=1 * MiB)) == pytest.approx(1 * MiB / (100 * MiB) + 2 * 0.1)
    none = scripted(Role.SENDER, [Decision(sndbuf=8 * MiB)], budget=budget)
    none.tick({}, 0, now=0.0)  # no RTT known anywhere: 0.1 s assumed
    assert none.close(snapshot(notsent_bytes=64 * KiB)) == pytest.approx(1.0 + 0.2)
    huge = scripted(Role.SENDER, [Decision(sndbuf=1 << 30)], budget=budget)
    huge.tick({}, 0, now=0.0)
    assert huge.close(snapshot(notsent_bytes=1 << 30)) == 60.0  # at most a minute held


# -- controller: the rate and the timeline -----------------------------------------------

def _receiver(now):
    ctl = SocketController("kernel", Role.RECEIVER, limits=STOCK)
    ctl.attach(now=now)
    return ctl


def _info(received):
    return {"snd_mss": 1448, "bytes_received": received, "rcv_rtt": 1000}


def test_the_rate_is_the_bytes_over_the_seconds_between_samples_50_ms_apart_at_least():
    ctl = _receiver(10.0)
    ctl.tick(_info(0), 0, now=10.0)
    ctl.tick(_info(1_000_000), 0, now=10.1)
    assert ctl.rate == pytest.approx(10e6)  # 1 MB in 100 ms
    ctl.tick(_info(1_500_000), 0, now=10.12)  # 20 ms on: too short a span to measure
    assert ctl.rate == pytest.approx(10e6)
    ctl.tick(_info(2_000_000), 0, now=10.2)
    assert ctl.rate == pytest.approx(10e6)  # 1 MB over the 100 ms since the last sample taken


def test_timeline_times_count_from_the_attach():
    ctl = _receiver(100.0)
    ctl.tick(_info(0), 0, now=100.0)
    ctl.record(100.5, 1, 2)
    assert ctl.stats.timeline[-1]["t"] == 0.5
