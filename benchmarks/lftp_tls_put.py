"""lftp uploads over FTPS to `drsftp serve`, repeated (decision 0032).

    python benchmarks/lftp_tls_put.py [--tries 20] [--size 500000] [--tls12]

Each try is the issue's command, `put` of one file with `ftp:ssl-force`; the
script counts the files stored whole, lftp's exit codes, and the transfer
log's `complete=no` lines (a first try cut by the client's reset, which
lftp retries). `--tls12` keeps lftp (GnuTLS) off TLS 1.3: no session ticket
follows the data connection's handshake. Loopback only; everything it
makes is removed at the end.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests"))
from tlscerts import make_certs

USER, PASSWORD = "alice", "alice-password"


def _digest(path: str) -> str:
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tries", type=int, default=20)
    ap.add_argument("--size", type=int, default=500_000)
    ap.add_argument("--tls12", action="store_true", help="lftp limited to TLS 1.2")
    a = ap.parse_args()
    work = tempfile.mkdtemp(prefix="drs-lftp-tls-")
    try:
        root = os.path.join(work, "srv")
        os.mkdir(root)
        src = os.path.join(work, "f.bin")
        with open(src, "wb") as f:
            f.write(os.urandom(a.size))
        want = _digest(src)
        from pathlib import Path

        certs = make_certs(Path(work) / "certs")
        log = os.path.join(work, "transfers.log")
        srv = subprocess.Popen([sys.executable, "-m", "drsftp", "serve", "--root", root, "--port", "0", "--user", USER,
                                "--password", PASSWORD, "--tls-cert", str(certs.good), "--log-file", log],
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        try:
            m = re.search(r":(\d+) ", srv.stdout.readline() if srv.stdout else "")
            if not m:
                raise SystemExit("lftp_tls_put: the server did not start")
            port = m.group(1)
            prio = 'set ssl:priority "NORMAL:-VERS-TLS1.3"; ' if a.tls12 else ""
            whole = clean_exit = 0
            for i in range(a.tries):
                r = subprocess.run(["lftp", "-u", f"{USER},{PASSWORD}", "-p", port, "-e",
                                    f"set ftp:ssl-force true; set ssl:verify-certificate no; {prio}"
                                    f"put {src} -o p{i}.bin; bye", "127.0.0.1"],
                                   capture_output=True, text=True, timeout=300)
                out = os.path.join(root, f"p{i}.bin")
                ok = os.path.exists(out) and _digest(out) == want
                whole += ok
                clean_exit += r.returncode == 0
        finally:
            srv.send_signal(signal.SIGTERM)
            srv.wait(10)
        with open(log) as f:
            text = f.read()
        cut = text.count("complete=no")
        print(f"{a.tries} puts of {a.size} bytes{' (TLS 1.2)' if a.tls12 else ''}: {whole} stored whole, "
              f"lftp exit 0 {clean_exit} times, {cut} tries logged complete=no (cut and retried)")
        return 0 if whole == a.tries else 1
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
