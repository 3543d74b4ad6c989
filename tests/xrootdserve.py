"""XRootD's HTTP interface (XrdHttp) over TLS on loopback, the field's
reference WebDAV storage, for tests that compare drsftp with it: a temp
dir holding the served root, the certificates (tests/tlscerts.py's CA)
and xrootd's admin files; ended by PID and removed after the block. Its
config and command line: drsftp/bench/common/xrootd.py (the field bench
runs the same). No authentication, no authorization: any client reads
and writes; only localhost is admitted."""

from __future__ import annotations

import base64
import contextlib
import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import tlscerts

from drsftp.bench.common.xrootd import XROOTD, TLSFiles, XRootDSetup, give_to_server, hashed_ca_dir, xrootd_argv
from drsftp.netem.link import stop_process

__all__ = ["TLSFiles", "XRootD", "make_test_ca", "xrootd_https"]
START_TIMEOUT = 20.0
PORT_TRIES = 3  # a free port taken by another process between the probe and xrootd's bind: try again


def make_test_ca(d: Path) -> TLSFiles:
    """A CA and a server certificate in ``d`` (tests/tlscerts.py), the key
    in a file of its own, and the CA's hashed directory."""
    certs = tlscerts.make_certs(d)
    pem = certs.good.read_text()
    split = pem.index("-----BEGIN PRIVATE KEY-----")
    cert, key = d / "server-cert.pem", d / "server-key.pem"
    cert.write_text(pem[:split])
    key.write_text(pem[split:])
    key.chmod(0o600)
    return TLSFiles(certs.ca, hashed_ca_dir(certs.ca, d / "ca-dir"), cert, key)


@dataclass
class XRootD:
    """A running xrootd: ``root``, the directory its URLs name files in."""

    port: int
    root: Path
    ca: TLSFiles
    log: Path

    def url(self, path: str = "", scheme: str = "https") -> str:
        return f"{scheme}://127.0.0.1:{self.port}/{path}"

    def put(self, name: str, data: bytes) -> Path:
        """A file in the served root, readable and writable by the server."""
        path = self.root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        give_to_server(self.root)
        return path


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _started(proc: subprocess.Popen, log: Path, http_port: int) -> bool:
    """Whether xrootd finished initializing and takes connections; False
    once it exited."""
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline and proc.poll() is None:
        if "initialization completed" in log.read_text(errors="replace"):
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", http_port), 1):
                return True
        time.sleep(0.05)
    return False


@contextlib.contextmanager
def xrootd_https(ca: TLSFiles | None = None, tpc: bool = False) -> Iterator[XRootD]:
    """xrootd with XrdHttp over TLS on 127.0.0.1 for the block, serving an
    empty root; ``ca``: the certificates to serve with (default: a fresh
    test CA in the temp dir); ``tpc``: with HTTP third-party copy and
    macaroons (a fresh secret), drsftp/bench/common/xrootd.py."""
    assert os.path.exists(XROOTD), f"{XROOTD} is missing (Debian: xrootd-server xrootd-server-plugins)"
    top = Path(tempfile.mkdtemp(prefix="drs-xrootd-", dir="/tmp"))
    proc: subprocess.Popen | None = None
    try:
        top.chmod(0o755)  # nobody reaches its files
        if ca is None:
            (top / "certs").mkdir()
            ca = make_test_ca(top / "certs")
        root = top / "root"
        root.mkdir()
        give_to_server(root)
        log = top / "xrootd.log"
        secret = None
        if tpc:
            secret = top / "macaroon-secret"
            secret.write_text(base64.b64encode(os.urandom(48)).decode() + "\n")
        for _ in range(PORT_TRIES):
            setup = XRootDSetup(_free_port(), _free_port(), root, top / "server", ca, tpc=tpc,
                                macaroons_secret=secret)
            with open(log, "w") as err:
                proc = subprocess.Popen(xrootd_argv(setup), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                        stderr=err)
            if _started(proc, log, setup.http_port):
                break
            stop_process(proc, 10)
            if "in use" not in log.read_text(errors="replace"):
                break
        if proc is None or proc.poll() is not None:
            raise RuntimeError(f"xrootd did not start: {log.read_text(errors='replace')[-3000:]}")
        yield XRootD(setup.http_port, root, ca, log)
    finally:
        if proc is not None:
            stop_process(proc, 10)
        shutil.rmtree(top, ignore_errors=True)
