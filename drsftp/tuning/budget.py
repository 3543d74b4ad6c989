"""A server-wide socket-buffer budget shared by the running transfers, sans-IO.

Amounts are kernel socket memory (the tuner converts: a receive window W
costs 1.6 W, a send buffer value S costs 2 S; drsftp.tuning.actuation.kernel_memory).

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
    whole: bool = False  # a claim held whole (see BufferBudget.claim), not shared
    held: int | None = None  # granted now; None: all it needs (claims, reservations)

    @property
    def need(self) -> int:
        return self.rcv + self.snd

    @property
    def holding(self) -> int:
        return self.need if self.held is None else self.held


class BufferBudget:
    def __init__(self, total: int, floor: int = 64 * 1024) -> None:
        if total <= 0:
            raise ValueError("the buffer budget must be positive")
        self.total = total
        self.floor = floor
        self._flows: dict[object, _Flow] = {}

    def limit(self, key: object, decision: Decision, *, pinned: int = 0) -> Decision:
        """Record what flow ``key`` wants and return what it may have: its
        share, and no more than the other flows leave (they give back what
        is over their own share at their next call, so the grants together
        stay within the budget at every moment, not only once all have been
        re-evaluated).  A flow over its share shrinks at once.  ``pinned``:
        memory the flow holds whatever it is granted (a receive buffer kept
        for a window already offered, which the kernel never takes back);
        the other flows' grants leave room for it."""
        flow = self._flows.get(key)
        if flow is None or flow.whole:  # (a claim given up: the flow shares from now on)
            flow = self._flows[key] = _Flow()
        if decision.rcv_window is not None:
            flow.rcv = decision.rcv_window
        if decision.sndbuf is not None:
            flow.snd = decision.sndbuf
        others = sum(f.holding for k, f in self._flows.items() if k != key)
        allowed = min(self.share(key), self.total - others)
        rcv, snd = flow.rcv, flow.snd
        if flow.need > allowed:
            scale = max(allowed, 0) / flow.need
            # a floor never raises a direction past what it asked for (the
            # ACK direction's small buffer stays small)
            floor = self._floor()
            rcv = max(int(rcv * scale), min(floor, rcv))
            snd = max(int(snd * scale), min(floor, snd))
        flow.held = max(rcv + snd, pinned)
        return Decision(
            rcv_window=rcv if decision.rcv_window is not None or flow.rcv else None,
            sndbuf=snd if decision.sndbuf is not None or flow.snd else None,
        )

    def share(self, key: object) -> int:
        """The most flow ``key`` may hold now: all it needs while the total
        fits, else what the whole claims leave, split in proportion to need."""
        flows = self._flows
        pool = self.total - sum(f.need for f in flows.values() if f.whole)
        wanted = sum(f.need for f in flows.values() if not f.whole)
        flow = flows.get(key)
        if flow is not None and flow.whole:
            return flow.need
        if flow is None or wanted <= pool:
            return max(pool, 0)
        return int(pool * flow.need / wanted)

    def can_claim(self, amount: int) -> bool:
        return amount <= self._free() // 2

    def claim(self, key: object, amount: int) -> bool:
        """Hold ``amount`` whole for flow ``key``: a buffer left to kernel
        autotuning, which the budget could not shrink later, counted at the
        most autotuning may grow it to.  Granted only when it fits in half
        of what the flows leave unclaimed (claims made together stay within
        the budget); the other flows then share the rest.  End it with
        :meth:`release`."""
        self._flows.pop(key, None)
        if not self.can_claim(amount):
            return False
        self._flows[key] = _Flow(rcv=amount, whole=True)
        return True

    def _free(self) -> int:
        return self.total - sum(f.need for f in self._flows.values())

    def _floor(self) -> int:
        # every flow keeps a minimum, but n floors never exceed the budget
        return min(self.floor, self.total // max(len(self._flows), 1))

    def reserve(self, key: object, amount: int) -> int:
        """A transient claim, such as the handshake buffer of DRS's open
        start (a limit the kernel holds before any data): at most half of
        what the flows leave unclaimed, so claims made together stay within
        the budget.  Returns the amount granted; end it with :meth:`release`."""
        self._flows.pop(key, None)
        grant = max(min(amount, self._free() // 2), 0)
        if grant:
            self._flows[key] = _Flow(rcv=grant)
        return grant

    def hold(self, key: object, amount: int) -> None:
        """Keep ``amount`` (no more than flow ``key`` holds now) whole until
        :meth:`release`: memory the kernel still holds for a socket closed
        with data queued, which it sends after close()."""
        flow = self._flows.get(key)
        amount = min(amount, flow.holding) if flow is not None else 0
        if amount <= 0:
            self._flows.pop(key, None)
            return
        self._flows[key] = _Flow(rcv=amount, whole=True)

    def release(self, key: object) -> None:
        self._flows.pop(key, None)

    def granted_total(self) -> int:
        return sum(f.holding for f in self._flows.values())
