"""A receiver's window opens for the bytes a request asked (docs/DESIGN.md#drs-demand)."""

from drsftp.tuning import DRSConfig, DRSTuning, Role, Sample

KiB, MiB = 1024, 1024 * 1024
RTT = 0.1


def steady(drs, per_rtt=500 * KiB, rtts=30):
    """A sender delivering ``per_rtt`` a round trip, a queue seen (the RTT
    30% over its minimum after the first few): the window settles near
    1.25x the flight, below 1 MiB; the time and bytes at the end."""
    t, got = 0.0, 0
    drs.on_sample(Sample(bytes_received=0), now=t, rtt=RTT)
    for i in range(rtts * 10):
        t, got = t + RTT / 10, got + per_rtt // 10
        drs.on_sample(Sample(bytes_received=got), now=t, rtt=RTT if i < 30 else 1.3 * RTT)
    return t, got


def test_a_request_larger_than_the_window_opens_it_at_once():
    """What arrives a round trip is what the window let through, so the
    window holds near it; the request for 1 MiB opens it to 1 MiB at the
    next decision."""
    plain, asked = DRSTuning(Role.RECEIVER, DRSConfig()), DRSTuning(Role.RECEIVER, DRSConfig())
    t, got = steady(plain)
    steady(asked)
    assert plain.window < MiB and asked.window < MiB and not asked.slow_start
    asked.expect(got, MiB)
    for drs in (plain, asked):
        drs.on_sample(Sample(bytes_received=got), now=t + 0.005, rtt=1.3 * RTT)
    assert plain.window < MiB
    assert asked.window >= MiB


def test_a_request_past_demand_max_is_left_to_drs():
    """A range of a large file opens nothing: parallel streams opened to it
    together would overshoot the queue; DRS ramps it."""
    drs = DRSTuning(Role.RECEIVER, DRSConfig(demand_max=2 * MiB))
    t, got = steady(drs)
    before = drs.window
    drs.expect(got, 64 * MiB)
    drs.on_sample(Sample(bytes_received=got), now=t + 0.005, rtt=1.3 * RTT)
    assert drs.window <= before * 1.3 < MiB


def test_what_came_no_longer_holds_the_window():
    drs = DRSTuning(Role.RECEIVER, DRSConfig(demand_max=2 * MiB))
    t, got = steady(drs)
    drs.expect(got, 1536 * KiB)
    drs.on_sample(Sample(bytes_received=got), now=t + 0.005, rtt=1.3 * RTT)
    assert drs.window >= 1536 * KiB
    for i in range(1, 300):  # it comes at 500 KB a round trip, and more of it: the window shrinks back
        drs.on_sample(Sample(bytes_received=got + i * 50 * KiB), now=t + i * RTT / 10, rtt=1.3 * RTT)
    assert drs.window < MiB


def test_the_next_request_replaces_the_last_and_zero_clears_it():
    """One request at a time on a connection: a later, smaller one (or 0,
    its body ended) leaves no room for the last one's bytes."""
    drs = DRSTuning(Role.RECEIVER, DRSConfig())
    t, got = steady(drs)
    drs.expect(got, 3 * MiB)
    drs.expect(got, 0)
    drs.on_sample(Sample(bytes_received=got), now=t + 0.005, rtt=1.3 * RTT)
    assert drs.window < MiB


def test_a_sender_ignores_what_is_asked():
    """What a request asks is a receiver's to open for: a sender told of
    one decides as one that was not, sample for sample."""
    told, plain = DRSTuning(Role.SENDER, DRSConfig()), DRSTuning(Role.SENDER, DRSConfig())
    decisions = []
    for drs in (told, plain):
        drs.on_sample(Sample(bytes_acked=0, cwnd_bytes=64 * KiB), now=0.0, rtt=RTT)
        if drs is told:
            drs.expect(0, 2 * MiB)
        decisions.append([drs.on_sample(Sample(bytes_acked=i * 200 * KiB, cwnd_bytes=(64 + 64 * i) * KiB),
                                        now=i * RTT / 2, rtt=RTT) for i in range(1, 20)])
    assert decisions[0] == decisions[1]
    assert any(d.sndbuf for d in decisions[0])  # (the samples made decisions to compare)
