"""A server-wide socket-buffer budget shared by the running transfers, sans-IO.

Amounts are kernel socket memory (the tuner converts: a receive window W
costs 1.6 W, a send buffer value S costs 2 S; drsftp.sockopt.kernel_memory).

Fairness as in the DRS papers: bandwidth follows the memory a flow is given,
so when the flows together want more than the budget, each gets a share in
proportion to its measured need.  A peer's report can raise a flow's need,
never its grant past that share; and every grant is within the flow's own
floor and cap as decided by its strategy.
"""

from __future__ import annotations

from dataclasses import dataclass

from .base import Decision


@dataclass
class _Flow:
    rcv: int = 0  # wanted receive window
    snd: int = 0  # wanted send buffer

    @property
    def need(self) -> int:
        return self.rcv + self.snd


class BufferBudget:
    def __init__(self, total: int, floor: int = 64 * 1024) -> None:
        if total <= 0:
            raise ValueError("the buffer budget must be positive")
        self.total = total
        self.floor = floor
        self._flows: dict[object, _Flow] = {}

    def limit(self, key: object, decision: Decision) -> Decision:
        """Record what flow ``key`` wants and return what it may have."""
        flow = self._flows.setdefault(key, _Flow())
        if decision.rcv_window is not None:
            flow.rcv = decision.rcv_window
        if decision.sndbuf is not None:
            flow.snd = decision.sndbuf
        share = self.share(key)
        if flow.need <= share:
            return decision
        scale = share / flow.need
        return Decision(
            rcv_window=None if decision.rcv_window is None else max(int(flow.rcv * scale), self._floor()),
            sndbuf=None if decision.sndbuf is None else max(int(flow.snd * scale), self._floor()),
        )

    def share(self, key: object) -> int:
        """The most flow ``key`` may hold now: all it needs while the total
        fits, else the budget split in proportion to need."""
        wanted = sum(f.need for f in self._flows.values())
        flow = self._flows.get(key)
        if flow is None or wanted <= self.total:
            return self.total
        return int(self.total * flow.need / wanted)

    def _floor(self) -> int:
        # every flow keeps a minimum, but n floors never exceed the budget
        return min(self.floor, self.total // max(len(self._flows), 1))

    def reserve(self, key: object, amount: int) -> int:
        """A transient claim, such as the handshake buffer of DRS's open
        start (a limit the kernel holds before any data): at most half of
        what the flows leave unclaimed, so claims made together stay within
        the budget.  Returns the amount granted; end it with :meth:`release`."""
        self._flows.pop(key, None)
        free = self.total - sum(f.need for f in self._flows.values())
        grant = max(min(amount, free // 2), 0)
        if grant:
            self._flows[key] = _Flow(rcv=grant)
        return grant

    def release(self, key: object) -> None:
        self._flows.pop(key, None)

    def granted_total(self) -> int:
        return sum(min(f.need, self.share(k)) for k, f in self._flows.items())
