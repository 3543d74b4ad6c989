"""`drsftp serve`'s handler classes with pyftpdlib's ThrottledDTPHandler
sending at most RATE bytes a second (stream mode), logging every command,
for tests that must
catch a third-party copy in the middle (tests/test_copy_faults.py).

    python tests/slowserve.py ROOT RATE USER PASSWORD [DATA_TIMEOUT]

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
    root, rate, user, password = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
    timeout = float(sys.argv[5]) if len(sys.argv) > 5 else 120.0
    configure(None, "text")  # the transfer log on stderr, as drsftp serve's
    config_logging(level=logging.DEBUG)  # and every command, as drsftp serve -vv logs them
    served = build_server(ServerConfig(root=root, port=0, user=user, password=password, data_timeout=timeout))
    served.close()
    dtp = type("SlowDTP", (served.handler.dtp_handler, ThrottledDTPHandler), {"write_limit": rate})
    handler = type("SlowHandler", (served.handler,), {"dtp_handler": dtp})
    server = FTPServer(("127.0.0.1", 0), handler)
    print(f"slow drsftp server on 127.0.0.1:{server.socket.getsockname()[1]} (test)", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
