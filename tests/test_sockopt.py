"""Socket actuation against the real kernel, on loopback."""

import contextlib
import dataclasses
import socket
import struct

import pytest

from drsftp.io import sockopt
from drsftp.tuning import Decision, actuation
from drsftp.tuning.actuation import NO_ACTION, BufferPlan

# SO_RCVBUF is set to 0.8 x the window: the usable window is about 1.25x the
# value set (docs/DESIGN.md, kf-doubling).  Written here, not
# read from drsftp.io.sockopt, so a wrong constant there fails these tests.
RCVBUF_PER_WINDOW = 0.8


def _pair(rcvbuf_before=None):
    lst = socket.socket()
    if rcvbuf_before:
        lst.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf_before)
    lst.bind(("127.0.0.1", 0))
    lst.listen(1)
    cli = socket.create_connection(lst.getsockname())
    srv, _ = lst.accept()
    lst.close()
    return cli, srv


class Actuator:
    """The controller's BufferPlan applied to one socket through sockopt,
    as SocketTuner applies it."""

    def __init__(self, sock, allow_force=False, limits=None, kernel_owns=None):
        self.sock = sock
        self.plan = BufferPlan(limits or sockopt.read_host_limits(), allow_force, kernel_owns=kernel_owns)
        self.peak_rcvbuf = 0

    def apply(self, decision, **kw):
        if not sockopt.apply_actions(self.sock, self.plan.actions(decision, **kw)):
            self.plan.allow_force = False

    def read_back(self):
        rcv, snd = sockopt.read_buffers(self.sock)
        self.peak_rcvbuf = max(self.peak_rcvbuf, rcv)
        return rcv, snd

    holding = property(lambda self: self.plan.holding)
    read_batch = property(lambda self: self.plan.read_batch)
    capped = property(lambda self: self.plan.capped)

    def held_memory(self):
        return self.plan.held_memory()


def test_tcp_info_parses_a_live_socket_and_truncated_buffers():
    cli, srv = _pair()
    with cli, srv:
        cli.sendall(b"x" * 100000)
        got = 0
        while got < 100000:
            got += len(srv.recv(65536))
        info = sockopt.tcp_info(srv)
        assert info["state"] == 1  # TCP_ESTABLISHED
        assert info["bytes_received"] == 100000
        assert sockopt.tcp_info(cli)["bytes_acked"] >= 100000
        raw = srv.getsockopt(socket.IPPROTO_TCP, sockopt.TCP_INFO, sockopt.TCP_INFO_SIZE)
    # the whole struct is read in one call; a prefix field by field: the same values
    whole, prefix = sockopt.parse_tcp_info(raw), sockopt.parse_tcp_info(raw[:-1])
    assert len(raw) == sockopt.TCP_INFO_SIZE and whole["bytes_received"] == 100000
    assert prefix == {k: v for k, v in whole.items() if k != "rcv_wnd"}  # the last field
    # an older kernel returns a prefix: fields past it are absent, not garbage
    short = sockopt.parse_tcp_info(raw[:104])
    assert "total_retrans" in short and "bytes_received" not in short
    assert sockopt.parse_tcp_info(b"") == {}


def test_layout_offsets_match_linux_uapi():
    offsets = {name: off for name, _fmt, off, _size in sockopt._LAYOUT}
    # include/uapi/linux/tcp.h: tcpi_rto at 8, tcpi_rtt at 68,
    # tcpi_bytes_acked at 120, tcpi_snd_wnd at 228
    assert offsets["rto"] == 8 and offsets["rtt"] == 68
    assert offsets["bytes_acked"] == 120 and offsets["snd_wnd"] == 228
    blob = bytearray(sockopt.TCP_INFO_SIZE)
    struct.pack_into("=I", blob, 68, 123456)
    assert sockopt.parse_tcp_info(bytes(blob))["rtt"] == 123456


def test_a_sample_carries_holes_and_the_data_held_behind_them():
    info = {"snd_mss": 1000, "sacked": 3, "lost": 2, "rcv_ooopack": 7, "snd_cwnd": 10, "bytes_received": 5}
    sample = actuation.sample_from_info(info)
    assert sample.held_bytes == 5000 and sample.out_of_order == 7 and sample.cwnd_bytes == 10000
    assert actuation.sample_from_info({"snd_mss": 1000}).held_bytes is None  # not reported: unknown


def test_window_scale_follows_buffer_set_before_the_handshake():
    cli, srv = _pair(rcvbuf_before=65536)
    with cli, srv:
        small = sockopt.tcp_info(srv)["rcv_wscale"]
    cli, srv = _pair()
    with cli, srv:
        large = sockopt.tcp_info(srv)["rcv_wscale"]
    assert small <= 1 < large  # docs/DESIGN.md#kf-wscale: 64 KiB first -> wscale 1


def test_actuator_sets_buffer_and_clamp_and_reads_back():
    limits = sockopt.read_host_limits()
    cli, srv = _pair()
    with cli, srv:
        act = Actuator(srv, allow_force=False, limits=limits)
        act.apply(Decision(rcv_window=256 * 1024, sndbuf=128 * 1024))
        rcv, snd = act.read_back()
        # SO_RCVBUF asks 0.8 x the window (usable ~1.25 x the value); the kernel doubles
        assert rcv == 2 * int(256 * 1024 * RCVBUF_PER_WINDOW) and snd == 2 * 128 * 1024
        clamp = srv.getsockopt(socket.IPPROTO_TCP, sockopt.TCP_WINDOW_CLAMP)
        assert clamp == 256 * 1024
        assert act.peak_rcvbuf == rcv


def test_a_senders_unsent_allowance_is_set_beside_its_buffer_and_kept_when_only_the_buffer_moves():
    cli, srv = _pair()
    with cli, srv:
        act = Actuator(srv, allow_force=False, limits=sockopt.read_host_limits())
        act.apply(Decision(sndbuf=512 * 1024, notsent=200 * 1024))

        def lowat():
            return srv.getsockopt(socket.IPPROTO_TCP, sockopt.TCP_NOTSENT_LOWAT)

        assert act.read_back()[1] == 2 * 512 * 1024 and lowat() == 200 * 1024
        act.apply(Decision(sndbuf=768 * 1024))
        assert act.read_back()[1] == 2 * 768 * 1024 and lowat() == 200 * 1024
        act.apply(Decision(notsent=1000))
        assert lowat() == actuation.NOTSENT_MIN


def test_reads_are_batched_to_an_eighth_of_the_window_and_the_clamp_survives_it():
    """SO_RCVLOWAT = window / 8 within [64 KiB, 512 KiB], else the default.
    Raising it on a buffer autotuning owns lifts a smaller window_clamp to
    it (tcp_set_rcvlowat): at 1/8 of the window it leaves DRS's clamp be."""
    def lowat(s):
        return s.getsockopt(socket.SOL_SOCKET, socket.SO_RCVLOWAT)

    def clamp(s):
        return s.getsockopt(socket.IPPROTO_TCP, sockopt.TCP_WINDOW_CLAMP)

    cli, srv = _pair()
    with cli, srv:  # the kernel fact: a clamp below the low-water mark is lifted to it, one above is kept
        srv.setsockopt(socket.IPPROTO_TCP, sockopt.TCP_WINDOW_CLAMP, 64 * 1024)
        srv.setsockopt(socket.SOL_SOCKET, socket.SO_RCVLOWAT, 512 * 1024)
        assert clamp(srv) == 512 * 1024
        srv.setsockopt(socket.IPPROTO_TCP, sockopt.TCP_WINDOW_CLAMP, 8 << 20)
        srv.setsockopt(socket.SOL_SOCKET, socket.SO_RCVLOWAT, 1 << 20)
        assert clamp(srv) == 8 << 20
    cli, srv = _pair()
    with cli, srv:
        act = Actuator(srv, limits=sockopt.read_host_limits(), kernel_owns="rcvbuf")
        for window, batch in ((2 << 20, 256 * 1024), (8 << 20, 512 * 1024), (256 * 1024, 1), (1 << 20, 128 * 1024)):
            act.apply(Decision(rcv_window=window))
            assert (lowat(srv), clamp(srv), act.read_batch) == (batch, window, batch)
        act.apply(Decision(rcv_window=1 << 20), before_handshake=True)  # no data yet: nothing to batch
        assert lowat(srv) == 128 * 1024
    cli, srv = _pair()
    with cli, srv:  # a buffer DRS sets: the same batch, within it
        act = Actuator(srv, limits=sockopt.read_host_limits())
        act.apply(Decision(rcv_window=1 << 20, sndbuf=16 * 1024))
        assert (lowat(srv), clamp(srv)) == (128 * 1024, 1 << 20)
        act.apply(Decision(rcv_window=16 * 1024))  # the ACK direction's size: nothing to batch
        assert lowat(srv) == 1
    from drsftp.io.tuner import SocketTuner
    from drsftp.tuning import Role

    # a fixed buffer: its one decision came before the handshake; a TLS data
    # channel (batch_reads off): a close_notify must wake the reader, however small
    for batch, expected in ((True, 512 * 1024), (False, 1)):
        cli, srv = _pair()
        with cli, srv:
            tuner = SocketTuner("fixed:4MiB", Role.RECEIVER, batch_reads=batch)
            tuner.handshake_window = 4 << 20
            tuner.attach(srv)
            tuner.tick(0)
            assert lowat(srv) == expected


@pytest.mark.parametrize("clamp,total", [(64 * 1024, 20_000_000), (None, 100_000)])
def test_a_low_water_mark_above_what_is_coming_does_not_stall_the_reader(clamp, total):
    """The kernel wakes a reader below SO_RCVLOWAT when the window is about
    to close (a clamp under the mark) and at EOF (a file under the mark)."""
    import select
    import threading

    cli, srv = _pair()
    with cli, srv:
        srv.setsockopt(socket.SOL_SOCKET, socket.SO_RCVLOWAT, 512 * 1024)
        if clamp:
            srv.setsockopt(socket.IPPROTO_TCP, sockopt.TCP_WINDOW_CLAMP, clamp)

        def send():
            cli.sendall(b"x" * total)
            cli.shutdown(socket.SHUT_WR)

        threading.Thread(target=send, daemon=True).start()
        got = 0
        while True:
            ready, _, _ = select.select([srv], [], [], 5.0)
            assert ready, f"reader never woken: {got} of {total} bytes read"
            n = len(srv.recv(4 << 20))
            if n == 0:
                break
            got += n
        assert got == total


def test_unforced_buffers_are_capped_and_the_cap_is_reported():
    limits = sockopt.read_host_limits()
    if limits.rmem_max is None:
        pytest.fail("no /proc/sys/net/core/rmem_max on this machine")
    cli, srv = _pair()
    with cli, srv:
        act = Actuator(srv, allow_force=False, limits=limits)
        act.apply(Decision(rcv_window=limits.rmem_max * 4))
        assert act.read_back()[0] == 2 * limits.rmem_max
        assert act.capped == ["rmem_max"]


@pytest.mark.root  # SO_RCVBUFFORCE needs CAP_NET_ADMIN
def test_forced_buffers_pass_the_cap_when_allowed():
    limits = sockopt.read_host_limits()
    assert limits.can_force, "CI runs as root: SO_RCVBUFFORCE must work here"
    cli, srv = _pair()
    with cli, srv:
        act = Actuator(srv, allow_force=True, limits=limits)
        act.apply(Decision(rcv_window=limits.rmem_max * 4))
        assert act.read_back()[0] == 2 * int(4 * limits.rmem_max * RCVBUF_PER_WINDOW)
        assert actuation.host_cap(limits, True, True) is None
    # unforced: the largest window is the one whose SO_RCVBUF is exactly rmem_max
    cap = actuation.host_cap(limits, False, True)
    assert cap == int(limits.rmem_max / RCVBUF_PER_WINDOW)
    cli, srv = _pair()
    with cli, srv:
        act = Actuator(srv, allow_force=False, limits=limits)
        act.apply(Decision(rcv_window=cap))
        assert act.read_back()[0] == 2 * limits.rmem_max and act.capped == []


def test_open_start_lets_a_raised_clamp_lift_rcv_ssthresh_at_once():
    """The open start's kernel fact (docs/DESIGN.md): rcv_ssthresh, the
    ceiling of the advertised window, rises with TCP_WINDOW_CLAMP only up to
    the window already offered.  A large buffer at the handshake offers a
    large window, so a small lock-and-clamp right after connect() can later
    be raised at once; a buffer never set offers ~64 KB and stays there."""
    limits = sockopt.read_host_limits()
    big, small, raised = 4 << 20, 256 << 10, 2 << 20
    results = {}
    for name, before in (("open", big), ("closed", None)):
        lst = socket.socket()
        lst.bind(("127.0.0.1", 0))
        lst.listen(1)
        cli = socket.socket()
        act = Actuator(cli, allow_force=limits.can_force, limits=limits)
        if before:
            act.apply(Decision(rcv_window=before), before_handshake=True)
        cli.connect(lst.getsockname())
        srv, _ = lst.accept()
        with lst, cli, srv:
            act.apply(Decision(rcv_window=small))
            act.apply(Decision(rcv_window=raised))
            results[name] = sockopt.tcp_info(cli)["rcv_ssthresh"]
    assert results["open"] >= raised * 0.95
    assert results["closed"] < raised / 4


def test_at_rmem_max_the_buffer_binds_not_the_clamp():
    """SO_RCVBUF = rmem_max gives ~1.33 x rmem_max of window
    (docs/DESIGN.md#socket-actuation); a clamp at the decision would cut it
    to 1.25 x."""
    limits = sockopt.HostLimits(rmem_max=1 << 20, wmem_max=1 << 20, tcp_rmem=None, tcp_wmem=None,
                                congestion_control=None, can_force=False)
    cli, srv = _pair()
    with cli, srv:
        act = Actuator(srv, allow_force=False, limits=limits)
        at_cap = int(limits.rmem_max / RCVBUF_PER_WINDOW)
        act.apply(Decision(rcv_window=at_cap))
        assert srv.getsockopt(socket.IPPROTO_TCP, sockopt.TCP_WINDOW_CLAMP) == 2 * limits.rmem_max
        act.apply(Decision(rcv_window=at_cap // 2))  # below the cap the clamp is the window
        assert srv.getsockopt(socket.IPPROTO_TCP, sockopt.TCP_WINDOW_CLAMP) == at_cap // 2


@pytest.mark.root  # SO_RCVBUFFORCE needs CAP_NET_ADMIN
def test_a_shrinking_receive_buffer_keeps_room_for_the_window_already_offered():
    """The clamp follows a shrink at once; the buffer keeps the memory the
    offered window needs (else the kernel prunes out-of-order data and
    reneges on SACKs), drains with the offer, and never grows for one."""
    limits = sockopt.read_host_limits()
    assert limits.can_force, "CI runs as root: FORCE keeps rmem_max out of this test"
    KiB = 1024

    def memory(window):
        return 2 * int(window * RCVBUF_PER_WINDOW)

    cli, srv = _pair()
    with cli, srv:
        act = Actuator(srv, allow_force=True, limits=limits)

        def clamp():
            return srv.getsockopt(socket.IPPROTO_TCP, sockopt.TCP_WINDOW_CLAMP)

        act.apply(Decision(rcv_window=256 * KiB), offered=3000 * KiB)  # an open start's offer
        assert act.read_back()[0] == memory(256 * KiB) and not act.holding
        act.apply(Decision(rcv_window=2048 * KiB), offered=3000 * KiB)
        assert act.read_back()[0] == memory(2048 * KiB)
        act.apply(Decision(rcv_window=512 * KiB), offered=1800 * KiB)  # shrink with 1.8 MiB offered
        assert clamp() == 512 * KiB
        assert act.read_back()[0] == memory(1800 * KiB) and act.holding
        assert act.held_memory() == memory(1800 * KiB)  # what a budget must count for this flow
        act.apply(Decision(rcv_window=512 * KiB), offered=2500 * KiB)  # no growth for an offer
        assert act.read_back()[0] == memory(1800 * KiB)
        act.apply(Decision(rcv_window=512 * KiB), offered=900 * KiB)  # the offer drains
        assert act.read_back()[0] == memory(900 * KiB)
        act.apply(Decision(rcv_window=512 * KiB), offered=400 * KiB)
        assert act.read_back()[0] == memory(512 * KiB) and not act.holding and act.held_memory() == 0


@pytest.mark.root  # SO_RCVBUFFORCE needs CAP_NET_ADMIN
def test_tuner_re_applies_a_held_buffer_until_the_offer_drains(monkeypatch):
    """A strategy that says "no change" still gets its held buffer brought
    down as the offered window drains."""
    from drsftp.io.tuner import SocketTuner
    from drsftp.tuning import Role

    offers = iter([2 << 20, 2 << 20, 1 << 20, 0])
    real_info = sockopt.tcp_info
    monkeypatch.setattr(sockopt, "tcp_info", lambda s: dict(real_info(s), rcv_wnd=next(offers)))
    cli, srv = _pair()
    with cli, srv:
        tuner = SocketTuner("fixed:4MiB", Role.RECEIVER, allow_force=True, limits=sockopt.read_host_limits())
        assert tuner.allow_force, "CI runs as root: FORCE keeps rmem_max out of this test"
        tuner.attach(srv)
        decisions = iter([Decision(rcv_window=3 << 20), Decision(rcv_window=256 << 10), Decision(), Decision()])
        monkeypatch.setattr(tuner.tuning, "on_sample", lambda sample, *, now, rtt: next(decisions))
        seen = []
        for _ in range(4):
            tuner.tick()
            seen.append(srv.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF))

    def memory(window):
        return 2 * int(window * RCVBUF_PER_WINDOW)

    assert seen == [memory(3 << 20), memory(2 << 20), memory(1 << 20), memory(256 << 10)]


def test_tuner_applies_only_the_buffers_a_decision_changes(monkeypatch):
    """A sender's decisions carry its constant ACK-side buffer: setting it
    again every tick was a syscall per tick for nothing."""
    from drsftp.io.tuner import SocketTuner
    from drsftp.tuning import Role

    cli, srv = _pair()
    with cli, srv:
        tuner = SocketTuner("fixed:1MiB", Role.SENDER, limits=sockopt.read_host_limits())
        tuner.attach(cli)
        decisions = iter([Decision(rcv_window=16 << 10, sndbuf=256 << 10),
                          Decision(rcv_window=16 << 10, sndbuf=512 << 10),
                          Decision(rcv_window=16 << 10, sndbuf=512 << 10),
                          Decision(rcv_window=32 << 10, sndbuf=512 << 10)])
        monkeypatch.setattr(tuner.tuning, "on_sample", lambda sample, *, now, rtt: next(decisions))
        applied = []
        monkeypatch.setattr(tuner.ctl.plan, "actions", lambda d, **kw: applied.append(d) or NO_ACTION)
        for _ in range(4):
            tuner.tick()
    assert applied == [Decision(rcv_window=16 << 10, sndbuf=256 << 10), Decision(sndbuf=512 << 10),
                       Decision(rcv_window=32 << 10)]
    assert tuner.ctl._applied == Decision(rcv_window=32 << 10, sndbuf=512 << 10)


def test_a_budget_passes_the_unsent_allowance_through(monkeypatch):
    """The budget bounds memory (the send buffer); the unsent allowance
    within it is no memory of its own and reaches the socket unchanged."""
    from drsftp.io.tuner import SocketTuner
    from drsftp.tuning import Role
    from drsftp.tuning.budget import BufferBudget

    cli, srv = _pair()
    with cli, srv:
        tuner = SocketTuner("drs", Role.SENDER, limits=sockopt.read_host_limits(), budget=BufferBudget(1 << 20))
        tuner.attach(cli)
        monkeypatch.setattr(tuner.tuning, "on_sample", lambda sample, *, now, rtt: Decision(
            rcv_window=16 << 10, sndbuf=4 << 20, notsent=300 << 10))
        applied = []
        monkeypatch.setattr(tuner.ctl.plan, "actions", lambda d, **kw: applied.append(d) or NO_ACTION)
        tuner.tick()
    assert applied[0].notsent == 300 << 10
    assert applied[0].sndbuf < 4 << 20  # the budget's share


TUNED = {"rmem_max": 4 << 20, "wmem_max": 4 << 20, "tcp_rmem": (4096, 131072, 64 << 20),
             "tcp_wmem": (4096, 65536, 64 << 20), "congestion_control": "bbr"}


def test_autotuning_reaching_past_setsockopt_is_detected_per_direction():
    tuned = sockopt.HostLimits(**TUNED, can_force=False)
    assert actuation.autotuning_reaches_further(tuned, False, True)
    assert actuation.autotuning_reaches_further(tuned, False, False)
    forced = sockopt.HostLimits(**TUNED, can_force=True)
    assert not actuation.autotuning_reaches_further(forced, True, True)
    assert actuation.autotuning_reaches_further(forced, False, True)  # FORCE not allowed by the user
    stock = sockopt.HostLimits(**dict(TUNED, tcp_rmem=(4096, 131072, 6 << 20), tcp_wmem=(4096, 16384, 4 << 20)),
                               can_force=False)
    assert not actuation.autotuning_reaches_further(stock, False, True)
    assert not actuation.autotuning_reaches_further(stock, False, False)


@pytest.mark.parametrize("role", ["receiver", "sender"])
def test_drs_leaves_the_data_buffer_to_autotuning_where_it_reaches_further(monkeypatch, role):
    """On an ESnet-tuned host without FORCE, any SO_RCVBUF/SO_SNDBUF would
    lock the buffer below what autotuning reaches: DRS sets only the ACK
    direction's buffer, at every step.  A receiver still holds its window
    with TCP_WINDOW_CLAMP, set again each tick: autotuning raises the clamp
    whenever it grows the buffer (measured on 6.18: 256 KiB -> 23 MB); a
    sender bounds its unsent data with TCP_NOTSENT_LOWAT."""
    from drsftp.io.tuner import SocketTuner
    from drsftp.tuning import Role

    calls = []
    real_set = sockopt._set_buffer
    monkeypatch.setattr(sockopt, "_set_buffer",
                        lambda sock, opt, force_opt, value, force: calls.append((opt, value))
                        or real_set(sock, opt, force_opt, value, force))
    r = Role.RECEIVER if role == "receiver" else Role.SENDER
    clock = [0.0]
    tuner = SocketTuner("drs", r, limits=sockopt.HostLimits(**TUNED, can_force=False), clock=lambda: clock[0])
    tuner.control_rtt = 0.1  # a long path: DRS would open-start
    data_opt, ack_opt = ((socket.SO_RCVBUF, socket.SO_SNDBUF) if r is Role.RECEIVER
                         else (socket.SO_SNDBUF, socket.SO_RCVBUF))
    lst = socket.socket()
    with lst:
        tuner.before_handshake(lst)
        lst.bind(("127.0.0.1", 0))
        lst.listen(1)
        cli = socket.create_connection(lst.getsockname())
        srv, _ = lst.accept()
    mine = srv.getsockopt(socket.SOL_SOCKET, data_opt)
    sender, receiver = (cli, srv) if r is Role.RECEIVER else (srv, cli)
    clamps, lowats = [], []
    with cli, srv:
        tuner.after_handshake(srv)
        tuner.attach(srv)
        for _ in range(6):
            sender.sendall(b"x" * 2_000_000)  # loopback: enough for autotuning to grow the buffer
            got = 0
            while got < 2_000_000:
                got += len(receiver.recv(1 << 20))
            clock[0] += 0.1
            tuner.tick(got)
            clamps.append((srv.getsockopt(socket.IPPROTO_TCP, sockopt.TCP_WINDOW_CLAMP), tuner.tuning.window))
            lowats.append((srv.getsockopt(socket.IPPROTO_TCP, sockopt.TCP_NOTSENT_LOWAT),
                           tuner.tuning.notsent, tuner.tuning.window))
        grown = srv.getsockopt(socket.SOL_SOCKET, data_opt)
    assert tuner.summary()["kernel_owns"] == ("rcvbuf" if r is Role.RECEIVER else "sndbuf")
    assert not [c for c in calls if c[0] == data_opt]
    assert calls and all(opt == ack_opt for opt, _ in calls)
    if r is Role.RECEIVER:
        assert grown > mine  # autotuning still sizes the buffer
        assert all(clamp == window for clamp, window in clamps), clamps  # DRS window, each tick
        assert tuner.summary()["handshake_window"] is None  # no open start: it would lock
    else:  # the unsent data the application may queue: DRS's unsent allowance, within its buffer decision
        assert all(lowat == max(notsent, 65536) and notsent <= window for lowat, notsent, window in lowats), lowats
        assert any(notsent < window for _, notsent, window in lowats)  # 40 ms at the acked rate, not the buffer


def test_under_a_budget_autotuning_is_left_the_buffer_only_while_the_budget_holds_its_most():
    """A server's budget bounds kernel memory: a buffer left to autotuning is
    claimed at tcp_rmem/tcp_wmem max for the transfer; when the budget cannot
    hold that, DRS sets the buffers within its share, as before."""
    from drsftp.io.tuner import SocketTuner
    from drsftp.tuning import Role
    from drsftp.tuning.budget import BufferBudget

    limits = sockopt.HostLimits(**TUNED, can_force=False)  # autotuning max 64 MiB each way
    for role in (Role.RECEIVER, Role.SENDER):
        host_cap = actuation.host_cap(limits, False, role is Role.RECEIVER)
        small = SocketTuner("drs", role, limits=limits, budget=BufferBudget(64 << 20))
        assert small.kernel_owns is None and small.tuning.config.cap == host_cap

        budget = BufferBudget(256 << 20)
        first = SocketTuner("drs", role, limits=limits, budget=budget)
        second = SocketTuner("drs", role, limits=limits, budget=budget)
        assert first.kernel_owns and second.kernel_owns  # both could, when made
        cli, srv = _pair()
        with cli, srv:
            first.attach(srv)  # claims 64 MiB of 256
            assert first.kernel_owns and budget.share(first) == 64 << 20
            budget.limit("other", Decision(rcv_window=100 << 20))  # fills what is left past a claim
            second.attach(cli)
            assert second.kernel_owns is None and second.tuning.config.cap == host_cap
            first.close()
            assert first not in budget._flows


def test_a_sender_closing_with_data_queued_keeps_it_in_the_budget_until_drained():
    """The kernel sends a closed socket's queue after close(): the server's
    budget keeps that memory held and the tuner says when to release it;
    a receiver, or a sender with nothing queued, releases at once."""
    from drsftp.io.tuner import DRAIN_MAX, SocketTuner
    from drsftp.tuning import Role
    from drsftp.tuning.budget import BufferBudget

    budget = BufferBudget(64 << 20)
    cli, srv = _pair()
    with cli, srv:
        sender = SocketTuner("fixed:1m", Role.SENDER, budget=budget)
        sender.attach(srv)
        budget.limit(sender, Decision(sndbuf=8 << 20))  # as its ticks would have
        srv.setblocking(False)
        sent = 0
        with contextlib.suppress(BlockingIOError):
            while sent < 64 << 20:  # the peer reads nothing: the queue fills
                sent += srv.send(b"x" * 65536)
        queued = sender._queued()
        assert 0 < queued <= sent
        drain = sender.close()
        assert drain is not None and 0 < drain <= DRAIN_MAX
        assert budget.granted_total() == min(2 * queued, 8 << 20)
        sender.release()
        assert budget.granted_total() == 0

        idle = SocketTuner("fixed:1m", Role.SENDER, budget=budget)
        idle.attach(cli)
        budget.limit(idle, Decision(sndbuf=1 << 20))
        assert idle.close() is None and budget.granted_total() == 0
        receiver = SocketTuner("fixed:1m", Role.RECEIVER, budget=budget)
        receiver.attach(srv)
        budget.limit(receiver, Decision(rcv_window=1 << 20))
        assert receiver.close() is None and budget.granted_total() == 0


def test_tuner_distrusts_a_data_rtt_far_below_the_control_paths():
    """rcv_rtt's first samples on a fresh connection can read 0.3 ms on a
    100 ms path; as DRS's min_rtt they would end slow start at once.  The
    control connection shares the path, so its RTT is the reference."""
    from drsftp.io.tuner import SocketTuner
    from drsftp.tuning import Role

    cli, srv = _pair()
    with cli, srv:
        tuner = SocketTuner("drs", Role.RECEIVER)
        tuner.note_control_rtt(cli)  # loopback: microseconds
        assert tuner.control_rtt is not None and tuner.control_rtt < 0.01
        tuner.control_rtt = 0.1  # as if the path were 100 ms
        tuner.attach(srv)
        cli.sendall(b"x" * 200000)
        got = 0
        while got < 200000:
            got += len(srv.recv(65536))
        srv.sendall(b"y" * 1000)  # both kernel estimates now exist (microseconds)
        cli.recv(2000)
        assert 0 < actuation.rtt_from_info(sockopt.tcp_info(srv), True) < 0.01
        tuner.tick(got)
        assert tuner.last_rtt == 0.1
        assert tuner.tuning.rtt.min_rtt == 0.1


def test_a_tuners_report_is_typed_pairs_and_the_wire_text_is_made_of_them():
    """DRS pairs are typed (key -> whole number) wherever they are combined
    (drsexchange); text exists only on the wire: report_pairs() formats
    report(), whose unknown values are left out."""
    from drsftp.ftp import drscmd
    from drsftp.io.tuner import SocketTuner
    from drsftp.tuning import Role

    cli, srv = _pair()
    with cli, srv:
        for role, sock in ((Role.RECEIVER, srv), (Role.SENDER, cli)):
            tuner = SocketTuner("drs", role)
            tuner.attach(sock)
            cli.sendall(b"x" * 100000)
            got = 0
            while got < 100000:
                got += len(srv.recv(65536))
            tuner.tick(got)
            report = tuner.report()
            assert report and all(type(v) is int and v >= 0 for v in report.values()), report
            assert report["rcvbuf"] > 0 and report["sndbuf"] > 0  # read back from the socket
            assert ("wnd" in report) is (role is Role.RECEIVER) and ("cwnd" in report) is (role is Role.SENDER)
            # a sender's busy and buffer-limited time (tcp_info's chronographs): -P auto's sharing
            assert ("busy_us" in report and "rwnd_lim_us" in report) is (role is Role.SENDER)
            assert drscmd.parse_args(tuner.report_pairs()).keys() == report.keys()  # (values read afresh)


def test_server_locks_the_open_start_buffer_after_the_listener_closed(monkeypatch):
    """pyftpdlib closes the passive listener (releasing the budget's
    reservation) before it builds the data channel; the tuner that sized the
    handshake must still lock the buffer then, whatever the control RTT
    reads by that time."""
    from drsftp.io.tuner import SocketTuner
    from drsftp.server.ftp.handler import DRSControlMixin
    from drsftp.tuning.budget import BufferBudget

    rtts = iter([0.1, 0.02])  # a second reading would fall under the 40 ms rule
    monkeypatch.setattr(SocketTuner, "note_control_rtt", lambda self, sock: setattr(self, "control_rtt", next(rtts)))

    host = sockopt.read_host_limits()  # with autotuning no further than setsockopt (else no open start)
    host = dataclasses.replace(host, tcp_rmem=(4096, 131072, 2 * host.rmem_max))

    class Session(DRSControlMixin):
        def __init__(self):  # just what the handshake halves read
            self.tuning_spec, self.allow_force, self.host_limits = "drs", False, host
            self.buffer_budget, self.socket, self._handshake_tuner = BufferBudget(64 << 20), None, None
            self.third_party_peers, self.permit_foreign_addresses = (), False  # the client's path only

    session = Session()
    with socket.socket() as sock:
        session.before_handshake(sock, None)  # (a passive listener)
        opened = sock.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF)
        session.release_handshake_reservation()  # the listener closes first
        session.after_handshake(sock)
        locked = sock.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF)
    assert opened > 2 * locked  # offered large, then locked at the floor
    assert session.buffer_budget.reserve(object(), 64 << 20) == 32 << 20  # nothing left reserved


@pytest.mark.parametrize("spec,batch", [("fixed:2MiB", 256 * 1024), ("drs", 1)])
def test_server_data_channel_batches_reads_for_a_fixed_buffer_set_at_the_handshake(spec, batch):
    """The control connection's tuner sizes the passive socket before the
    handshake; the data channel's own tuner starts at STOR.  A fixed buffer
    makes no decision after the handshake, so its window must reach the
    data channel's tuner for the read batch; DRS's open start locks the
    floor after the handshake and its ticks set the batch from then on."""
    from drsftp.server.ftp.handler import DRSControlMixin, DRSDataMixin
    from drsftp.tuning import Role

    class Session(DRSControlMixin):
        def __init__(self, sock):
            self.tuning_spec, self.allow_force, self.host_limits = spec, False, sockopt.read_host_limits()
            self.buffer_budget, self.socket, self._handshake_tuner = None, sock, None
            self.third_party_peers, self.permit_foreign_addresses = (), False  # the client's path only
            self.remote_ip = sock.getpeername()[0]

    class Loop:
        def call_later(self, *a, **k):
            return None

    class Data(DRSDataMixin):
        def __init__(self, sock, session):  # just what _start_tuning reads
            self.tuner, self._tick_handle, self._closed = None, None, False
            self.socket, self.cmd_channel, self.ioloop = sock, session, Loop()
            self.data_peer = sock.getpeername()[0]  # the client's own address: its control RTT counts

        def get_transmitted_bytes(self):
            return 0

    lst = socket.socket()
    cli, srv = _pair()  # the control connection (a 0.5 ms control RTT would skip the open start)
    with lst, cli, srv:
        session = Session(srv)
        session.before_handshake(lst, None)  # (a passive listener)
        lst.bind(("127.0.0.1", 0))
        lst.listen(1)
        data_cli = socket.create_connection(lst.getsockname())
        data_srv, _ = lst.accept()
        with data_cli, data_srv:
            session.after_handshake(data_srv)
            data = Data(data_srv, session)
            data._start_tuning(Role.RECEIVER)
            assert data_srv.getsockopt(socket.SOL_SOCKET, socket.SO_RCVLOWAT) == batch
            assert data.tuner.summary()["handshake_window"] == (2 << 20 if spec.startswith("fixed") else None)


def test_a_parallel_stream_keeps_drs_where_autotuning_reaches_further():
    """rmem_max 4 MiB, tcp_rmem max 32 MiB: one stream leaves its receive
    buffer to autotuning, one of N streams keeps DRS and offers its cap at
    the handshake (open start), since N sockets multiply the 4 MiB
    (docs/DESIGN.md#parallel-streams)."""
    from drsftp.io.tuner import SocketTuner
    from drsftp.tuning import Role

    limits = sockopt.HostLimits(rmem_max=4 << 20, wmem_max=4 << 20, tcp_rmem=(4096, 131072, 32 << 20),
                                tcp_wmem=(4096, 16384, 4 << 20), congestion_control="bbr", can_force=False)
    alone = SocketTuner("drs", Role.RECEIVER, limits=limits)
    one_of_n = SocketTuner("drs", Role.RECEIVER, limits=limits, parallel=True)
    assert alone.kernel_owns == "rcvbuf" and one_of_n.kernel_owns is None
    # the window setsockopt can give one socket: 1.25 x rmem_max (docs/DESIGN.md#kf-doubling)
    assert one_of_n.tuning.config.cap == 5 << 20
    assert one_of_n.tuning.before_handshake(rtt=0.1).rcv_window == 5 << 20
    assert alone.tuning.config.cap == 32 << 20  # the clamp's memory ceiling: tcp_rmem max


def test_a_locked_buffer_is_given_back_to_autotuning_once():
    with socket.socket() as s:
        assert sockopt.unlock_buffer(s, receive=True) is False  # nothing set: nothing locked
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16 << 10)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 16 << 10)
        assert sockopt.unlock_buffer(s, receive=True) is True
        locks = s.getsockopt(socket.SOL_SOCKET, sockopt.SO_BUF_LOCK)
        assert locks == sockopt.SOCK_SNDBUF_LOCK  # the send buffer stays as set
        assert sockopt.unlock_buffer(s, receive=True) is False
