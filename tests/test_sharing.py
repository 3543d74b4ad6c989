"""drsftp/tuning/count/sharing.py: what the senders of a transfer report of the path
(docs/decisions/0021-streams-that-share.md).  Expected values come from the
RFCs and the docs, written here, not read back from the module's constants
(docs/MUTATION.md: many of these tests pin a rule a mutation run found open)."""

from drsftp.tuning.count.sharing import LimitMeter, PathSample, from_infos


class Senders:
    """Cumulative sender figures a path sample sums: ``limited`` of each
    interval's busy time capped (the -P auto and -c auto tests' senders)."""

    def __init__(self) -> None:
        self.busy = self.limited = self.retrans = 0

    def __call__(self, rtt: float = 0.1, limited: float = 0.5, retransmits: int = 0) -> PathSample:
        self.busy += 1_000_000
        self.limited += int(limited * 1_000_000)
        self.retrans += retransmits
        return PathSample(rtt, self.retrans, self.busy, self.limited)


# -- the senders' figures (docs/decisions/0021-streams-that-share.md; tuning/count/sharing.py) ---------

def test_a_path_is_its_senders_least_rtt():
    assert from_infos([{"rtt": 120_000}, {"rtt": 90_000}]).rtt == 0.09


def test_senders_busy_and_never_limited_are_a_share_of_0_and_one_microsecond_busy_counts():
    m = LimitMeter()
    m.update(PathSample(0.1, 0, 1_000, 500))
    assert m.update(PathSample(0.1, 0, 2_000, 500)) == 0.0  # busy, no cap held them: congestion
    assert m.update(PathSample(0.1, 0, 2_001, 501)) == 1.0  # (microseconds: one is busy time)
