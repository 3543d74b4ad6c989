"""`drsftp serve`'s handler classes with pyftpdlib's ThrottledDTPHandler
sending at most RATE bytes a second (stream mode; with --both receiving
too), logging every command, for tests that must catch a transfer in the
middle (tests/test_copy_faults.py, tests/test_interrupts.py).

    python tests/slowserve.py ROOT RATE USER PASSWORD [DATA_TIMEOUT] [--both]

Prints ``slow drsftp server on 127.0.0.1:PORT (test)`` once listening, as
`drsftp serve` prints its address (conftest.ServerProcess reads it)."""

from __future__ import annotations

import logging
import sys

from pyftpdlib.handlers import ThrottledDTPHandler
from pyftpdlib.log import config_logging
from pyftpdlib.servers import FTPServer

from drsftp.server.app import ServerConfig, build_server
from drsftp.server.ops.translog import configure


def main() -> None:
    both = "--both" in sys.argv
    args = [a for a in sys.argv[1:] if a != "--both"]
    root, rate, user, password = args[0], int(args[1]), args[2], args[3]
    timeout = float(args[4]) if len(args) > 4 else 120.0
    configure(None, "text")  # the transfer log on stderr, as drsftp serve's
    config_logging(level=logging.DEBUG)  # and every command, as drsftp serve -vv logs them
    served = build_server(ServerConfig(root=root, port=0, user=user, password=password, data_timeout=timeout))
    served.close()
    limits = {"write_limit": rate, **({"read_limit": rate} if both else {})}
    dtp = type("SlowDTP", (served.handler.dtp_handler, ThrottledDTPHandler), limits)
    handler = type("SlowHandler", (served.handler,), {"dtp_handler": dtp})
    server = FTPServer(("127.0.0.1", 0), handler)
    print(f"slow drsftp server on 127.0.0.1:{server.socket.getsockname()[1]} (test)", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
