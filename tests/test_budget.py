"""The server-wide buffer budget: shares in proportion to need."""

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from drsftp.tuning import Decision
from drsftp.tuning.budget import BufferBudget

MiB = 1 << 20


def test_everything_granted_while_the_total_fits():
    b = BufferBudget(64 * MiB)
    assert b.limit("a", Decision(rcv_window=8 * MiB)) == Decision(rcv_window=8 * MiB)
    assert b.limit("b", Decision(sndbuf=16 * MiB)) == Decision(sndbuf=16 * MiB)


def test_over_budget_shares_follow_need():
    b = BufferBudget(30 * MiB)
    b.limit("small", Decision(rcv_window=10 * MiB))
    big = b.limit("big", Decision(rcv_window=50 * MiB))
    assert big.rcv_window == 20 * MiB  # its share is 30 x 50/60, but the small flow still holds 10
    small = b.limit("small", Decision(rcv_window=10 * MiB))
    assert small.rcv_window == 5 * MiB  # over its share (30 x 10/60): shrinks at once
    assert b.limit("big", Decision(rcv_window=50 * MiB)).rcv_window == 25 * MiB
    assert b.granted_total() == 30 * MiB
    b.release("big")
    assert b.limit("small", Decision(rcv_window=10 * MiB)).rcv_window == 10 * MiB


def test_memory_pinned_for_an_offered_window_leaves_the_others_less():
    """A receive buffer kept for a window already offered cannot shrink to
    its grant; the other flows' grants leave room for it, so the total the
    kernel holds stays within the budget (the 32-client load test went
    21 KB over once without this)."""
    b = BufferBudget(20 * MiB)
    b.limit("a", Decision(rcv_window=10 * MiB))
    b.limit("b", Decision(rcv_window=10 * MiB))
    a = b.limit("a", Decision(rcv_window=2 * MiB), pinned=8 * MiB)
    assert a.rcv_window == 2 * MiB  # the grant follows the need; the pin is not granted anew
    assert b.limit("b", Decision(rcv_window=20 * MiB)).rcv_window == 12 * MiB  # not 18: a still holds 8
    assert b.granted_total() == 20 * MiB


def test_a_peer_cannot_claim_more_than_its_share():
    """A hostile peer inflating its need still gets at most the budget, and
    the honest flow keeps a floor."""
    b = BufferBudget(16 * MiB, floor=256 * 1024)
    b.limit("honest", Decision(rcv_window=4 * MiB))
    greedy = b.limit("greedy", Decision(rcv_window=1 << 40))
    honest = b.limit("honest", Decision(rcv_window=4 * MiB))
    assert greedy.rcv_window <= 16 * MiB
    assert honest.rcv_window >= 256 * 1024


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 9), st.integers(1, 1 << 36), st.booleans()), min_size=1, max_size=60),
       st.integers(1 * MiB, 1 << 30))
def test_property_grants_stay_within_budget_plus_floors_at_every_step(events, total):
    """What the flows hold together (each its latest grant, both directions)
    stays within the budget at every step, not only once every flow has
    been re-evaluated; only floors may add to it.  No direction is granted
    more than it asked for."""
    floor = 64 * 1024
    b = BufferBudget(total, floor=floor)
    held, wants = {}, {}
    for key, want, rcv in events:
        w = wants.setdefault(key, {})
        w["rcv" if rcv else "snd"] = want
        d = b.limit(key, Decision(rcv_window=want) if rcv else Decision(sndbuf=want))
        assert (d.rcv_window or 0) <= w.get("rcv", 0) and (d.sndbuf or 0) <= w.get("snd", 0)
        held[key] = (d.rcv_window or 0) + (d.sndbuf or 0)
        assert sum(held.values()) <= total + 2 * floor * len(held)
        assert b.granted_total() == sum(held.values())


def test_reservations_stay_within_what_the_flows_leave():
    b = BufferBudget(16 * MiB)
    b.limit("running", Decision(rcv_window=8 * MiB))
    grants = [b.reserve(("session", i), 64 * MiB) for i in range(6)]
    assert grants[0] == 4 * MiB  # half of the unclaimed 8 MiB
    assert all(later <= earlier for earlier, later in itertools.pairwise(grants))
    assert 8 * MiB + sum(grants) <= 16 * MiB  # claims made together still fit
    b.release(("session", 0))
    assert b.reserve(("session", 0), 1 * MiB) == 1 * MiB  # small claims are granted whole
    assert b.reserve("full", 0) == 0


def test_whole_claims_are_kept_and_the_other_flows_share_the_rest():
    """A buffer left to kernel autotuning is claimed at its most and kept
    whole; DRS flows share what the claims leave; a claim that does not fit
    in half of what is unclaimed is refused (that flow sets its buffers)."""
    b = BufferBudget(256 * MiB)
    assert b.claim("auto1", 32 * MiB) and b.claim("auto2", 32 * MiB)
    assert b.limit("drs", Decision(rcv_window=300 * MiB)).rcv_window == 192 * MiB
    assert b.share("auto1") == 32 * MiB
    assert not b.claim("auto3", 32 * MiB)  # the DRS flow's need leaves nothing unclaimed
    b.release("drs")
    assert not b.can_claim(97 * MiB) and b.can_claim(96 * MiB)  # half of the 192 MiB left
    b.release("auto1")
    assert b.limit("drs", Decision(rcv_window=300 * MiB)).rcv_window == 224 * MiB


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 9), st.integers(1, 1 << 34), st.sampled_from(["rcv", "snd", "claim"])),
                min_size=1, max_size=60),
       st.integers(1 * MiB, 1 << 30))
def test_property_claims_and_grants_stay_within_budget_plus_floors(events, total):
    b = BufferBudget(total, floor=64 * 1024)
    for key, want, kind in events:
        if kind == "claim":
            b.claim(key, want)
        else:
            b.limit(key, Decision(rcv_window=want) if kind == "rcv" else Decision(sndbuf=want))
    final, shared = 0, 0
    for key, f in list(b._flows.items()):
        if f.whole:
            final += f.need
            continue
        shared += 1
        d = b.limit(key, Decision(rcv_window=f.rcv or None, sndbuf=f.snd or None))
        final += (d.rcv_window or 0) + (d.sndbuf or 0)
    assert final <= total + 2 * 64 * 1024 * shared


def test_a_closed_senders_queue_stays_held_until_released():
    """A socket closed with data queued keeps that memory till the kernel
    has sent it: held whole (no more than the flow held), others share
    the rest, release ends it."""
    b = BufferBudget(16 * MiB)
    b.limit("sender", Decision(sndbuf=6 * MiB))
    b.hold("sender", 4 * MiB)
    assert b.granted_total() == 4 * MiB
    assert b.limit("next", Decision(rcv_window=16 * MiB)).rcv_window == 12 * MiB
    b.hold("gone", 1 * MiB)  # a flow the budget no longer has: nothing to hold
    assert "gone" not in b._flows
    b.hold("next", 64 * MiB)  # never more than the flow held
    assert b.share("next") == 12 * MiB
    b.release("sender")
    assert b.granted_total() == 12 * MiB


KiB = 1 << 10


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
