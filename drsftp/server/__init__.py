"""The standing FTP server with the DRS command (pyftpdlib).

Its names load on first use (PEP 562): a client that only needs
ConfigError never imports pyftpdlib and OpenSSL (a tenth of a second).
"""

from __future__ import annotations

from typing import Any

from .config import ConfigError  # noqa: F401

_LAZY = {"ServerConfig": "app", "build_server": "app", "serve": "app", "DRSFTPHandler": "ftp.handler"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
