"""A new connection's RTT from its TCP handshake, and a bounded wait for
it: what -P auto's first count (the HTTPS client's get, a pull's warm-ups)
takes as the path's before any request was answered."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Callable

from . import sockopt

POLL = 0.005  # s between looks at the handshake
WAIT = 2.0  # s it is looked for at most (a peer that never answers)


def handshake_rtt(sock: socket.socket | None) -> float | None:
    """Seconds: ``sock``'s RTT once its TCP handshake gave a sample, else None."""
    us = sockopt.tcp_info(sock).get("rtt") if sock is not None else None
    return us / 1e6 if us else None


async def wait_rtt(rtt: Callable[[], float | None], until: Callable[[], bool] = lambda: False) -> float | None:
    """``rtt()`` once it is known, or None after WAIT seconds or once ``until()``."""
    for _ in range(int(WAIT / POLL)):
        value = rtt()
        if value is not None or until():
            return value
        await asyncio.sleep(POLL)
    return rtt()
