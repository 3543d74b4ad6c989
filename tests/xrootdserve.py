"""XRootD's HTTP interface (XrdHttp) over TLS on loopback, the field's
reference WebDAV storage, for tests that compare drsftp with it: a temp
dir holding the served root, the certificates (tests/tlscerts.py's CA)
and xrootd's admin files; ended by PID and removed after the block.

Running as root, xrootd refuses to start unless told to become another
user (``-R``): it runs as nobody, which owns the served root. XRootD has
no bind address: it listens on every interface, so ``xrd.allow`` admits
only connections from localhost (the tests connect to 127.0.0.1 alone).
No authentication, no authorization: any client reads and writes."""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import tlscerts

from drsftp.netem.link import stop_process

XROOTD = "/usr/bin/xrootd"
# XrdHttp answers RFC 3230 Want-Digest with the checksums named here
CHECKSUMS = ("adler32", "md5")
START_TIMEOUT = 20.0
PORT_TRIES = 3  # a free port taken by another process between the probe and xrootd's bind: try again


@dataclass
class TLSFiles:
    """The test CA as the field's tools take it: ``ca`` (one PEM file:
    drsftp's --ca-file), ``ca_dir`` (an OpenSSL hashed directory: davix's
    --capath, gfal2's X509_CERT_DIR); ``cert``/``key``: a server
    certificate for localhost and 127.0.0.1 signed by it."""

    ca: Path
    ca_dir: Path
    cert: Path
    key: Path

    def env(self) -> dict[str, str]:
        """The environment that makes gfal2 (through davix) trust the CA."""
        return {**os.environ, "X509_CERT_DIR": str(self.ca_dir)}


def make_test_ca(d: Path) -> TLSFiles:
    """A CA and a server certificate in ``d`` (tests/tlscerts.py), the key
    in a file of its own, and the CA's hashed directory (``<hash>.0``, as
    c_rehash names it: OpenSSL finds a CA by its subject's hash)."""
    certs = tlscerts.make_certs(d)
    pem = certs.good.read_text()
    split = pem.index("-----BEGIN PRIVATE KEY-----")
    cert, key = d / "server-cert.pem", d / "server-key.pem"
    cert.write_text(pem[:split])
    key.write_text(pem[split:])
    key.chmod(0o600)
    ca_dir = d / "ca-dir"
    ca_dir.mkdir()
    digest = subprocess.run(["openssl", "x509", "-noout", "-subject_hash", "-in", str(certs.ca)],
                            capture_output=True, text=True, check=True, timeout=30).stdout.strip()
    shutil.copy(certs.ca, ca_dir / f"{digest}.0")
    return TLSFiles(certs.ca, ca_dir, cert, key)


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
        _give_to_server(self.root)
        return path


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _as_root() -> bool:
    return os.geteuid() == 0


def _give_to_server(*paths: Path) -> None:
    """Root runs xrootd as nobody: it must own what it reads and writes."""
    if not _as_root():
        return
    nobody = pwd.getpwnam("nobody")
    for top in paths:
        os.chown(top, nobody.pw_uid, nobody.pw_gid)
        for base, dirs, files in os.walk(top):
            for name in dirs + files:
                os.chown(os.path.join(base, name), nobody.pw_uid, nobody.pw_gid)


def _config(port: int, http_port: int, root: Path, adm: Path, ca: TLSFiles) -> str:
    return "\n".join([
        f"xrd.port {port}",
        f"xrd.protocol XrdHttp:{http_port} libXrdHttp.so",
        # XrdHttp serves HTTPS on its port once xrd.tls gives a certificate
        f"xrd.tls {ca.cert} {ca.key}",
        f"xrd.tlsca certdir {ca.ca_dir}",
        "xrd.allow host localhost",
        "all.export /",
        f"oss.localroot {root}",
        f"all.adminpath {adm}",
        f"all.pidpath {adm}",
        f"xrootd.chksum max {len(CHECKSUMS)} {' '.join(CHECKSUMS)}",
        "",
    ])


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
def xrootd_https(ca: TLSFiles | None = None) -> Iterator[XRootD]:
    """xrootd with XrdHttp over TLS on 127.0.0.1 for the block, serving an
    empty root; ``ca``: the certificates to serve with (default: a fresh
    test CA in the temp dir)."""
    assert os.path.exists(XROOTD), f"{XROOTD} is missing (Debian: xrootd-server xrootd-server-plugins)"
    top = Path(tempfile.mkdtemp(prefix="drs-xrootd-", dir="/tmp"))
    proc: subprocess.Popen | None = None
    try:
        top.chmod(0o755)  # nobody reaches its files
        if ca is None:
            (top / "certs").mkdir()
            ca = make_test_ca(top / "certs")
        root, adm, mine = top / "root", top / "adm", top / "tls"
        root.mkdir()
        adm.mkdir()
        # the server reads copies of its own (the caller's may sit in a 0700 directory); the key 0600
        shutil.copytree(ca.ca_dir, mine / "ca-dir")
        shutil.copy(ca.cert, mine / "cert.pem")
        shutil.copy(ca.key, mine / "key.pem")
        served = TLSFiles(ca.ca, mine / "ca-dir", mine / "cert.pem", mine / "key.pem")
        _give_to_server(root, adm, mine)
        log = top / "xrootd.log"
        for _ in range(PORT_TRIES):
            port, http_port = _free_port(), _free_port()
            (top / "xrootd.cfg").write_text(_config(port, http_port, root, adm, served))
            argv = [XROOTD, *(("-R", "nobody") if _as_root() else ()), "-c", str(top / "xrootd.cfg")]
            with open(log, "w") as err:
                proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err)
            if _started(proc, log, http_port):
                break
            stop_process(proc, 10)
            if "in use" not in log.read_text(errors="replace"):
                break
        if proc is None or proc.poll() is not None:
            raise RuntimeError(f"xrootd did not start: {log.read_text(errors='replace')[-3000:]}")
        yield XRootD(http_port, root, ca, log)
    finally:
        if proc is not None:
            stop_process(proc, 10)
        shutil.rmtree(top, ignore_errors=True)
