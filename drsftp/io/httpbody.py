"""What an HTTP body read through aiohttp still has to bring on its socket,
for the SO_RCVLOWAT of a kept-alive connection's reader: the client's
ranged GETs and a pull's (docs/DESIGN.md#http-rcvlowat).

aiohttp's StreamReader counts the body bytes its parser fed it
(``total_bytes``, not documented) and asyncio's TLS transport holds the
bytes it has not decrypted yet (``get_read_buffer_size``); where either is
missing the reads are not batched (``coming`` is 0)."""

from __future__ import annotations

from typing import Any

from ..tuning.actuation import body_read_batch

# A TLS record's bytes at most (RFC 5246 sec. 6.2.3; TLS 1.3's are fewer:
# RFC 8446 sec. 5.2): the TLS layer may hold one half-read.
RECORD = (1 << 14) + 2048


def coming(resp: Any, body: int) -> int:
    """Bytes of ``resp``'s body of ``body`` bytes still to arrive on its
    socket, at least: those not yet fed to its reader, less those its TLS
    transport holds undecrypted."""
    fed = getattr(resp.content, "total_bytes", None)
    conn = resp.connection
    transport = conn.transport if conn is not None else None
    if not isinstance(fed, int) or transport is None or body <= 0:
        return 0
    buffered = getattr(transport, "get_read_buffer_size", None)
    return body - fed - (buffered() if buffered is not None else 0)


def read_mark(batch: int, still: int) -> int:
    """SO_RCVLOWAT for a read batch while ``still`` (:func:`coming`) bytes
    are to arrive: never more than the socket will get (1: the default)."""
    return body_read_batch(batch, still, RECORD)
