"""The asyncio FTP client with DRS (and, in client/http, its HTTPS side).

Its names load on first use (PEP 562): a command over HTTPS never imports
the FTP client's sessions and transfers (decision 0045)."""

from __future__ import annotations

from typing import Any

_LAZY = {"TransferResult": "result", "ControlConnection": "session.control", "FTPError": "session.control",
         "TransferOptions": "transfer.getput", "get": "transfer.getput", "put": "transfer.getput"}
__all__ = sorted(_LAZY)


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
