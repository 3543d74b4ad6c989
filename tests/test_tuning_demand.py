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
    asked.expect(got + MiB)
    for drs in (plain, asked):
        drs.on_sample(Sample(bytes_received=got), now=t + 0.005, rtt=1.3 * RTT)
    assert plain.window < MiB
    assert asked.window >= MiB


def test_what_came_no_longer_holds_the_window_and_the_bound_is_demand_max():
    drs = DRSTuning(Role.RECEIVER, DRSConfig(demand_max=2 * MiB))
    t, got = steady(drs)
    drs.expect(got + 64 * MiB)
    drs.on_sample(Sample(bytes_received=got), now=t + 0.005, rtt=1.3 * RTT)
    assert drs.window == 2 * MiB  # (not 64 MiB: a range of a big file is DRS's to ramp)
    drs.expect(got + 1)  # (an earlier end: what is asked only grows)
    got += 64 * MiB
    for i in range(1, 100):  # everything came, then a trickle: the window shrinks back
        drs.on_sample(Sample(bytes_received=got + i * 1000), now=t + i * RTT, rtt=1.3 * RTT)
    assert drs.window < MiB


def test_a_sender_ignores_what_is_asked():
    drs = DRSTuning(Role.SENDER, DRSConfig())
    drs.on_sample(Sample(bytes_acked=0), now=0.0, rtt=RTT)
    drs.expect(8 * MiB)
    assert drs.on_sample(Sample(bytes_acked=1000), now=0.05, rtt=RTT).rcv_window in (None, DRSConfig().ack_buffer)
