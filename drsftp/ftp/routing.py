"""Which reply answers which command, sans I/O.

RFC 959 replies come in command order, but a transfer command has two
(1yz, then the final reply), and DRS may be sent while the transfer runs.
Its reply can then arrive before the transfer's final reply, so routing by
order alone would hand the 226 to DRS.  Replies to DRS carry the word DRS
first (docs/PROTOCOL.md), so they are routed by that mark instead.
"""

from __future__ import annotations

from collections import deque
from typing import Any

from .replies import Reply


class ReplyRouter:
    """Pair replies with the commands waiting for them."""

    def __init__(self) -> None:
        self._pending: deque[tuple[str, Any]] = deque()  # (verb, token)

    def sent(self, verb: str, token: Any) -> None:
        self._pending.append((verb.upper(), token))

    @property
    def pending(self) -> int:
        return len(self._pending)

    def route(self, reply: Reply) -> tuple[Any, bool] | None:
        """Returns (token, final) for the command this reply answers, or
        None for an unsolicited reply (e.g. 421 before shutdown)."""
        if reply.first.startswith("DRS"):
            for i, (verb, token) in enumerate(self._pending):
                if verb == "DRS":
                    del self._pending[i]
                    return token, True
        for i, (verb, token) in enumerate(self._pending):
            if verb == "DRS":
                continue  # never hand a non-DRS reply to DRS
            if reply.preliminary:
                return token, False
            del self._pending[i]
            return token, True
        # A stock server answering DRS without the mark (500 not understood)
        if self._pending and self._pending[0][0] == "DRS":
            return self._pending.popleft()[1], True
        return None

    def fail_all(self) -> list[Any]:
        tokens = [t for _, t in self._pending]
        self._pending.clear()
        return tokens
