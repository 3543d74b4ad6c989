"""The buffer budget shared by the FTP ioloop and the HTTP thread.

drsftp.tuning.budget.BufferBudget is sans-IO and knows no threads; `drsftp
serve` runs pyftpdlib's ioloop in the main thread and aiohttp's loop in
another (docs/decisions/0033-aiohttp-for-http.md), and both fronts' socket
controllers draw on the one budget.  This subclass holds one lock around
each public call, so a call sees and leaves the flows whole.
"""

from __future__ import annotations

import threading

from ...tuning.base import Decision
from ...tuning.budget import BufferBudget


class LockedBudget(BufferBudget):
    def __init__(self, total: int, floor: int = 64 * 1024) -> None:
        super().__init__(total, floor)
        self._lock = threading.RLock()  # (limit calls share: re-entered)

    def limit(self, key: object, decision: Decision, *, pinned: int = 0) -> Decision:
        with self._lock:
            return super().limit(key, decision, pinned=pinned)

    def share(self, key: object) -> int:
        with self._lock:
            return super().share(key)

    def can_claim(self, amount: int) -> bool:
        with self._lock:
            return super().can_claim(amount)

    def claim(self, key: object, amount: int) -> bool:
        with self._lock:
            return super().claim(key, amount)

    def reserve(self, key: object, amount: int) -> int:
        with self._lock:
            return super().reserve(key, amount)

    def hold(self, key: object, amount: int) -> None:
        with self._lock:
            super().hold(key, amount)

    def release(self, key: object) -> None:
        with self._lock:
            super().release(key)

    def granted_total(self) -> int:
        with self._lock:
            return super().granted_total()
