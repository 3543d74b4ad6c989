"""XRootD's HTTP interface (XrdHttp) over TLS, the field's reference WebDAV
storage: its configuration and command line in one place, for the field
bench (drsftp/bench/field) and the tests' loopback server
(tests/xrootdserve.py).

Running as root, xrootd refuses to start unless told to become another
user (``-R``): it runs as nobody, which must own its admin directory and
its copy of the TLS files (the key 0600). XRootD has no bind address: it
listens on every interface, so ``xrd.allow`` admits only the host named
(none: every host, for a network namespace of its own).

HTTP third-party copy (``tpc``): XrdHttpTPC answers COPY, pull and push;
its outbound TLS trusts ``xrd.tlsca``. Macaroons (``macaroons_secret``, a
file of base64, 32 bytes decoded at least): XrdMacaroons mints them on
POST ``application/macaroon-request`` and checks ``Authorization: Bearer``
ahead of the default authorization, whose database admits every user to
everything (the server stays as open as without it: the tokens are what
gfal2 asks for before it sends ``Credential: none``; without one it asks
for ``gridsite`` delegation, which XrdHttpTPC refuses)."""

from __future__ import annotations

import os
import pwd
import shutil
from dataclasses import dataclass
from pathlib import Path

XROOTD = "/usr/bin/xrootd"
# XrdHttp answers RFC 3230 Want-Digest with the checksums named here
CHECKSUMS = ("adler32", "md5")


@dataclass(frozen=True)
class TLSFiles:
    """A CA as the field's tools take it: ``ca`` (one PEM file: drsftp's
    --ca-file), ``ca_dir`` (an OpenSSL hashed directory: davix's --capath,
    gfal2's X509_CERT_DIR, xrd.tlsca); ``cert``/``key``: a server
    certificate signed by it and its key."""

    ca: Path
    ca_dir: Path
    cert: Path
    key: Path

    def env(self) -> dict[str, str]:
        """The environment that makes gfal2 (through davix) trust the CA."""
        return {**os.environ, "X509_CERT_DIR": str(self.ca_dir)}


@dataclass(frozen=True)
class XRootDSetup:
    """Where one xrootd listens and what it serves: ``root``, the directory
    its URLs name files in; ``top``, a directory of its own (its config,
    admin files and TLS copies go there); ``allow``: the one client host
    admitted, or None for any."""

    port: int  # xrd.port: the root:// protocol
    http_port: int  # XrdHttp: https://
    root: Path
    top: Path
    tls: TLSFiles
    allow: str | None = "localhost"
    tpc: bool = False  # COPY (XrdHttpTPC)
    macaroons_secret: Path | None = None  # XrdMacaroons' key: base64 of 32 bytes or more


def hashed_ca_dir(ca: Path, into: Path) -> Path:
    """``into`` holding the CA certificate as ``<hash>.0``, as c_rehash names
    it: OpenSSL finds a CA in a directory by its subject's hash."""
    from OpenSSL import crypto

    cert = crypto.load_certificate(crypto.FILETYPE_PEM, ca.read_bytes())
    into.mkdir(parents=True, exist_ok=True)
    shutil.copy(ca, into / f"{cert.subject_name_hash():08x}.0")
    return into


def as_root() -> bool:
    return os.geteuid() == 0


def give_to_server(*paths: Path) -> None:
    """Root runs xrootd as nobody: it must own what it reads and writes."""
    if not as_root():
        return
    nobody = pwd.getpwnam("nobody")
    for top in paths:
        os.chown(top, nobody.pw_uid, nobody.pw_gid)
        for base, dirs, files in os.walk(top):
            for name in dirs + files:
                os.chown(os.path.join(base, name), nobody.pw_uid, nobody.pw_gid)


def server_tls(tls: TLSFiles, into: Path) -> TLSFiles:
    """Copies of the server's TLS files in ``into``, owned by the server (the
    caller's may sit in a 0700 directory); the key 0600."""
    shutil.rmtree(into, ignore_errors=True)
    into.mkdir(parents=True)
    shutil.copytree(tls.ca_dir, into / "ca-dir")
    shutil.copy(tls.cert, into / "cert.pem")
    shutil.copy(tls.key, into / "key.pem")
    (into / "key.pem").chmod(0o600)
    give_to_server(into)
    return TLSFiles(tls.ca, into / "ca-dir", into / "cert.pem", into / "key.pem")


def _tpc_lines(s: XRootDSetup) -> list[str]:
    """COPY and macaroons: see the module's docstring."""
    top = s.top
    lines = ["http.exthandler xrdtpc libXrdHttpTPC.so"] if s.tpc else []
    if s.macaroons_secret is not None:
        lines += [
            "all.sitename drsftp-test",
            "ofs.authorize 1",
            f"acc.authdb {top / 'authdb'}",
            "ofs.authlib libXrdMacaroons.so",
            "http.exthandler xrdmacaroons libXrdMacaroons.so",
            f"macaroons.secretkey {top / 'macaroon-secret'}",
            "macaroons.trace info",  # each token checked: its log line
            "http.header2cgi Authorization authz",  # a bearer token reaches the authorization on every request
        ]
    return lines


def config(s: XRootDSetup, adm: Path, tls: TLSFiles) -> str:
    return "\n".join([
        f"xrd.port {s.port}",
        f"xrd.protocol XrdHttp:{s.http_port} libXrdHttp.so",
        # XrdHttp serves HTTPS on its port once xrd.tls gives a certificate
        f"xrd.tls {tls.cert} {tls.key}",
        f"xrd.tlsca certdir {tls.ca_dir}",
        *([f"xrd.allow host {s.allow}"] if s.allow else []),
        "all.export /",
        f"oss.localroot {s.root}",
        f"all.adminpath {adm}",
        f"all.pidpath {adm}",
        f"xrootd.chksum max {len(CHECKSUMS)} {' '.join(CHECKSUMS)}",
        *_tpc_lines(s),
        "",
    ])


def xrootd_argv(s: XRootDSetup) -> list[str]:
    """Lays out ``s.top`` (a fresh admin directory, the server's copy of the
    TLS files, the config file) and returns the command that serves
    ``s.root``; as root it runs as nobody."""
    s.top.mkdir(parents=True, exist_ok=True)
    s.top.chmod(0o755)  # nobody reaches its files
    adm = s.top / "adm"
    shutil.rmtree(adm, ignore_errors=True)
    adm.mkdir()
    give_to_server(adm)
    tls = server_tls(s.tls, s.top / "tls")
    if s.macaroons_secret is not None:
        (s.top / "authdb").write_text("u * / a\n")  # every user, every right: a request without a valid token
        secret = s.top / "macaroon-secret"
        shutil.copy(s.macaroons_secret, secret)
        secret.chmod(0o600)
        give_to_server(secret, s.top / "authdb")
    cfg = s.top / "xrootd.cfg"
    cfg.write_text(config(s, adm, tls))
    return [XROOTD, *(("-R", "nobody") if as_root() else ()), "-c", str(cfg)]
