"""drsftp's handler classes in the place of pyftpdlib's, configured as
`drsftp serve` configures them (drsftp.server.app.build_server).

pyftpdlib's functional tests name ``pyftpdlib.handlers.FTPHandler``,
``DTPHandler``, ``TLS_FTPHandler`` and ``TLS_DTPHandler``: when their
modules are imported (they bind the names then) and while each test runs
(its ``reset_server_opts`` reaches the classes through the module), those
names are drsftp's; the rest of the time pyftpdlib's own, so no other
module ever binds drsftp's classes by mistake.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

import pyftpdlib.handlers

from drsftp.server.app import ServerConfig, build_server

HERE = os.path.dirname(os.path.abspath(__file__))
CERTFILE = os.path.join(HERE, "keycert.pem")  # the suite's own (certificate and key in one file)


def _served_handler(root: str, tls_cert: str | None = None) -> type:
    """The control handler class `drsftp serve --root ROOT` runs (its
    listener closed at once: the suite makes its own servers)."""
    server = build_server(ServerConfig(root=root, port=0, anonymous_read=True, tls_cert=tls_cert))
    server.close()
    return server.handler


def _drsftp_classes(root: str) -> dict[str, type]:
    plain = _served_handler(root)
    tls = _served_handler(root, tls_cert=CERTFILE)
    return {"FTPHandler": plain, "DTPHandler": plain.dtp_handler,
            "TLS_FTPHandler": tls, "TLS_DTPHandler": tls.dtp_handler}


# DRSFTP_SUITE_STOCK=1 leaves pyftpdlib's classes in place: the suite's baseline
STOCK_RUN = os.environ.get("DRSFTP_SUITE_STOCK") == "1"
NAMES = ("FTPHandler", "DTPHandler", "TLS_FTPHandler", "TLS_DTPHandler")
STOCK = {name: getattr(pyftpdlib.handlers, name) for name in NAMES}
_classes: dict[str, type] = {}


@contextlib.contextmanager
def swapped(root: str) -> Iterator[dict[str, type]]:
    """pyftpdlib.handlers' four names are drsftp's for the block."""
    if STOCK_RUN:
        yield dict(STOCK)
        return
    if not _classes:
        _classes.update(_drsftp_classes(root))
    for name, cls in _classes.items():
        setattr(pyftpdlib.handlers, name, cls)
    try:
        yield _classes
    finally:
        for name, cls in STOCK.items():
            setattr(pyftpdlib.handlers, name, cls)
