"""`drsftp serve`'s handlers with pyftpdlib's ThrottledDTPHandler moving
at most RATE bytes a second both ways (stream mode), for tests that must
interrupt a get, put or copy in the middle (tests/test_interrupts.py).

    python tests/throttleserve.py ROOT RATE USER PASSWORD

Prints ``throttled drsftp server on 127.0.0.1:PORT (test)`` once
listening, as `drsftp serve` prints its address (conftest.ServerProcess)."""

from __future__ import annotations

import sys

from pyftpdlib.handlers import ThrottledDTPHandler
from pyftpdlib.servers import FTPServer

from drsftp.server.app import ServerConfig, build_server
from drsftp.server.ops.translog import configure


def main() -> None:
    root, rate, user, password = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
    configure(None, "text")  # the transfer log on stderr, as drsftp serve's
    served = build_server(ServerConfig(root=root, port=0, user=user, password=password))
    served.close()
    dtp = type("ThrottledDTP", (served.handler.dtp_handler, ThrottledDTPHandler),
               {"read_limit": rate, "write_limit": rate})
    handler = type("ThrottledHandler", (served.handler,), {"dtp_handler": dtp})
    server = FTPServer(("127.0.0.1", 0), handler)
    print(f"throttled drsftp server on 127.0.0.1:{server.socket.getsockname()[1]} (test)", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
