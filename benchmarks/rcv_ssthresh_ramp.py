"""How fast does the receiver's advertised-window ceiling (rcv_ssthresh) grow?

    python benchmarks/rcv_ssthresh_ramp.py drs-closed  # buffer locked small by SO_RCVBUF
    python benchmarks/rcv_ssthresh_ramp.py drs         # the open start
    python benchmarks/rcv_ssthresh_ramp.py kernel      # autotuning, buffer unlocked

One download over an emulated 1 Gbit/s, 100 ms link (root), sampling the
client's data socket with `ss -tmi` every 200 ms: rcv_ssthresh, rcv_space,
bytes received and the unread queue (skmem r).  docs/DESIGN.md cites it.
"""

import re
import subprocess
import sys
import tempfile
import time

from drsftp.bench.common.tunings import PORT, drsftp_url, serving
from drsftp.netem.link import Link


def main(tuning: str) -> None:
    if tuning not in ("drs", "drs-closed", "kernel"):
        sys.exit(f"unknown tuning {tuning!r}; choose from drs, drs-closed, kernel")
    with tempfile.TemporaryDirectory(prefix="drs-ramp-") as root:
        with open(f"{root}/z.bin", "wb") as f:
            f.truncate(800 << 20)
        with Link(rtt=0.1, rate=1e9) as link, serving(link, root, tuning, force=True):
            client = link.popen("client", [sys.executable, "-m", "drsftp", "get",
                                           drsftp_url(link.server_addr, "z.bin"), f"{root}/out.bin",
                                           "--tuning", tuning, "--force-buffers", "--max-time", "6"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            print(f"{tuning}: t(s)  rcv_ssthresh  rcv_space  bytes_received  unread")
            t0 = time.monotonic()
            while client.poll() is None and time.monotonic() - t0 < 8:
                out = link.run("client", ["ss", "-tmiHn", "state", "established", "(", "dport", "!=", f":{PORT}", ")"],
                               timeout=5).stdout
                vals = [re.search(k + r":(\d+)", out) for k in ("rcv_ssthresh", "rcv_space", "bytes_received")]
                unread = re.search(r"skmem:\(r(\d+)", out)
                if vals[0]:
                    print(f"  {time.monotonic() - t0:5.2f}", *(v.group(1) if v else "-" for v in vals),
                          unread.group(1) if unread else "-")
                time.sleep(0.2)
            client.wait(30)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "drs")
