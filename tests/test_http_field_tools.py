"""The field's HTTP tools over TLS (docs/HTTP.md#interop): davix-get
(whole files and ``Range``), davix-put, davix-ls, gfal-copy both ways,
gfal-ls and gfal-sum against `drsftp serve --http-port` and against
XRootD's XrdHttp (tests/xrootdserve.py), each serving the same tree; every
byte and checksum compared with Python's own.  And the other way round:
`drsftp get` (one stream and ``-P 4``), `put` and `ls` of https:// URLs
against XRootD.  Both servers present a certificate of the suite's test
CA, which every client is told to trust; none runs with verification off.
A missing tool fails the tests."""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import os
import re
import shutil
import subprocess
import zlib
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import PASSWORD, USER, drsftp, make_file, running_server, sha256_file
from xrootdserve import TLSFiles, make_test_ca, xrootd_https

TOOLS = ("davix-get", "davix-put", "davix-ls", "gfal-copy", "gfal-ls", "gfal-sum", "xrootd", "openssl")
TREE = {"a.bin": 3_000_017, "empty.dat": 0, "sub/b.txt": 1234, "big.bin": 9 * (1 << 20) + 4321}
# davix 0.8 does not answer a 401 Basic challenge with --userlogin/--userpass (it gives up on
# the 401): the tools send the credentials up front, in the header (RFC 7617)
BASIC = "Authorization: Basic " + base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()


def run(argv, env=None, timeout=120):
    assert shutil.which(argv[0]), f"{argv[0]} is missing (Debian: davix, gfal2-util-scripts, gfal2-plugin-http)"
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env=env, check=False)


def ok(result):
    assert result.returncode == 0, f"exit {result.returncode}: {result.stdout}{result.stderr}"
    return result.stdout


@dataclass
class Peer:
    """A server on 127.0.0.1:``port`` serving ``root``; ``headers``: what
    logs in (none for XRootD, which has no authentication here)."""

    name: str
    port: int
    root: Path
    ca: TLSFiles
    headers: tuple[str, ...]

    def url(self, path: str = "", scheme: str = "https") -> str:
        return f"{scheme}://127.0.0.1:{self.port}/{path}"

    def local(self, path: str = "") -> Path:
        return self.root / path

    def davix(self, tool: str, *args: str):
        """davix trusts the CA of --capath (a hashed directory)."""
        heads = [a for h in self.headers for a in ("-H", h)]
        return run([tool, "--capath", str(self.ca.ca_dir), *heads, *args])

    def gfal(self, tool: str, *args: str):
        """gfal2 trusts the CAs of X509_CERT_DIR; the scripts find their
        Python with GFAL_PYTHONBIN."""
        heads = [a for h in self.headers for a in ("-D", f"HTTP PLUGIN:HEADERS={h}")]
        env = {**self.ca.env(), "GFAL_PYTHONBIN": "/usr/bin/python3"}
        return run([tool, *heads, *args], env=env)


def make_tree(root: Path) -> None:
    """The served tree, and w/ for the uploads."""
    (root / "sub").mkdir(parents=True)
    (root / "w").mkdir()
    for i, (name, size) in enumerate(TREE.items()):
        make_file(root / name, size, seed=i)


@contextlib.contextmanager
def drsftp_https(root: Path, ca: TLSFiles):
    """`drsftp serve` with --http-port over TLS: the HTTPS port (its
    second line on stdout)."""
    with running_server(root, "--http-port", "0", "--tls-cert", str(ca.cert), "--tls-key", str(ca.key)) as srv:
        line = srv.proc.stdout.readline()
        m = re.search(r"HTTPS on 127\.0\.0\.1:(\d+)", line)
        assert m, f"no HTTPS port in {line!r}: {srv.stderr_text()}"
        yield int(m.group(1))


@pytest.fixture(scope="module")
def ca(tmp_path_factory):
    return make_test_ca(tmp_path_factory.mktemp("ca"))


@pytest.fixture(scope="module")
def peers(ca, tmp_path_factory):
    root = tmp_path_factory.mktemp("drs") / "srv"
    make_tree(root)
    with drsftp_https(root, ca) as port, xrootd_https(ca) as xrd:
        make_tree(xrd.root)
        xrd.put("w/.keep", b"")  # hands the tree to xrootd's user
        yield {"drsftp": Peer("drsftp", port, root, ca, (BASIC,)),
               "xrootd": Peer("xrootd", xrd.port, xrd.root, ca, ())}


@pytest.fixture(params=["drsftp", "xrootd"])
def peer(request, peers):
    return peers[request.param]


def test_tools_are_installed():
    """./run installs them (Debian: davix, gfal2-plugin-http, xrootd-server, xrootd-server-plugins)."""
    for tool in TOOLS:
        assert shutil.which(tool), f"{tool} is missing"


def test_an_untrusted_server_certificate_is_refused(peer):
    """Without the test CA the tools refuse both servers: TLS is on and
    checked, so the passing tests below did check it."""
    for result in (run(["davix-get", *[a for h in peer.headers for a in ("-H", h)], peer.url("sub/b.txt")]),
                   run(["gfal-ls", peer.url("", "davs")],
                       env={**os.environ, "GFAL_PYTHONBIN": "/usr/bin/python3"})):
        assert result.returncode != 0
        assert "certificate" in result.stderr.lower(), result.stderr


# -- davix ------------------------------------------------------------------------


def test_davix_get_whole_files_byte_identical(peer, tmp_path):
    for name in TREE:
        out = tmp_path / name.replace("/", "-")
        ok(peer.davix("davix-get", peer.url(name), str(out)))
        assert sha256_file(out) == sha256_file(peer.local(name)), name


def davix_range(peer, spec, out):
    """``davix-get`` with ``Range: bytes=SPEC``: what it wrote, and what
    that range of a.bin is (RFC 9110 sec. 14.1.2)."""
    data = peer.local("a.bin").read_bytes()
    first, _, last = spec.partition("-")
    want = data[-int(last):] if not first else data[int(first):int(last) + 1 if last else None]
    ok(peer.davix("davix-get", "-H", f"Range: bytes={spec}", peer.url("a.bin"), str(out)))
    return out.read_bytes(), want


@pytest.mark.parametrize("spec", ["100-199", "0-0", "1048570-2097160", "2999990-3000016"])
def test_davix_get_with_a_range_gets_those_bytes(peer, tmp_path, spec):
    """first-last ranges: some bytes, one byte, across MiB blocks, to the
    last byte; the body written is exactly those bytes."""
    got, want = davix_range(peer, spec, tmp_path / "part.bin")
    assert got == want


@pytest.mark.parametrize("spec", ["2999990-", "2999990-9999999", "-17", "-3000017"])
def test_davix_get_with_an_open_suffix_or_long_range_from_drsftp(peers, tmp_path, spec):
    """Open-ended, past the end (the server shortens it) and suffix ranges,
    from drsftp only: XRootD 5.5 answers ``bytes=N-`` with an empty 206
    (``Content-Range: bytes N--1/SIZE``), a range past the end with a 206
    promising bytes it lacks, and a suffix range with the whole file (200)."""
    got, want = davix_range(peers["drsftp"], spec, tmp_path / "part.bin")
    assert got == want


def test_davix_put_byte_identical_also_over_a_file(peer, tmp_path):
    """A new file, then another body over it: the second's bytes, whole,
    and no part file left beside it."""
    for seed, size in ((11, 2_000_003), (12, 77_777)):
        src = make_file(tmp_path / f"src{seed}.bin", size, seed=seed)
        ok(peer.davix("davix-put", str(src), peer.url("w/davix-up.bin")))
        assert sha256_file(peer.local("w/davix-up.bin")) == sha256_file(src)
    assert not [p for p in os.listdir(peer.local("w")) if p.endswith(".part")]


def davix_ls_l(peer, path):
    """``davix-ls -l``: {name: (is a directory, size)}."""
    out = {}
    for line in ok(peer.davix("davix-ls", "-l", peer.url(path))).splitlines():
        mode, _links, size, _date, _time, name = line.split(None, 5)
        out[name.strip()] = (mode.startswith("d"), int(size))
    return out


def local_entries(directory: Path, skip=(".keep",)):
    return {e.name: (e.is_dir(), 0 if e.is_dir() else e.stat().st_size)
            for e in os.scandir(directory) if e.name not in skip}


def test_davix_ls_lists_names_types_and_sizes(peer):
    got = davix_ls_l(peer, "")
    files = {n: v for n, v in got.items() if not v[0]}
    assert {n for n in got} == set(local_entries(peer.root))
    assert files == {n: v for n, v in local_entries(peer.root).items() if not v[0]}
    assert got["sub"][0] and got["w"][0]
    assert davix_ls_l(peer, "sub/") == local_entries(peer.local("sub"))


# -- gfal2 ------------------------------------------------------------------------


@pytest.mark.parametrize("scheme", ["davs", "https"])
def test_gfal_copy_down_and_up_byte_identical(peer, tmp_path, scheme):
    """file:// to the server and back, with davs:// and https:// URLs."""
    src = make_file(tmp_path / "src.bin", 2_500_009, seed=21)
    up = f"w/gfal-up-{scheme}.bin"
    ok(peer.gfal("gfal-copy", f"file://{src}", peer.url(up, scheme)))
    assert sha256_file(peer.local(up)) == sha256_file(src)
    for name in (up, "a.bin", "empty.dat"):
        dest = tmp_path / f"down-{name.replace('/', '-')}"
        ok(peer.gfal("gfal-copy", peer.url(name, scheme), f"file://{dest}"))
        assert sha256_file(dest) == sha256_file(peer.local(name)), name


def gfal_ls_l(peer, path):
    """``gfal-ls -l``: {name: (is a directory, size)}."""
    out = {}
    for line in ok(peer.gfal("gfal-ls", "-l", peer.url(path, "davs"))).splitlines():
        mode, _links, _uid, _gid, size, _mon, _day, _hm, name = line.split(None, 8)
        out[name.strip()] = (mode.startswith("d"), int(size))
    return out


def test_gfal_ls_lists_names_types_and_sizes(peer):
    got = gfal_ls_l(peer, "")
    assert set(got) == set(local_entries(peer.root))
    for name, (is_dir, size) in local_entries(peer.root).items():
        assert got[name][0] == is_dir, name
        if not is_dir:
            assert got[name][1] == size, name
    assert {n: v for n, v in gfal_ls_l(peer, "sub").items()} == local_entries(peer.local("sub"))


def test_gfal_ls_of_drsftp_gives_what_it_gives_of_xrootd(peers):
    """The same tree: the same names, types and file sizes."""
    drs, xrd = (gfal_ls_l(peers[name], "") for name in ("drsftp", "xrootd"))
    assert {n: v for n, v in drs.items() if not v[0]} == {n: v for n, v in xrd.items() if not v[0]}
    assert {n for n, v in drs.items() if v[0]} == {n for n, v in xrd.items() if v[0]} == {"sub", "w"}


@pytest.mark.parametrize("algorithm", ["ADLER32", "MD5"])
def test_gfal_sum_matches_pythons_checksum(peer, algorithm):
    """gfal-sum asks by RFC 3230 ``Want-Digest``; the value it prints is
    the file's, for a big file, an empty one and one in a subdirectory."""
    for name in ("a.bin", "empty.dat", "sub/b.txt"):
        data = peer.local(name).read_bytes()
        want = f"{zlib.adler32(data):08x}" if algorithm == "ADLER32" else hashlib.md5(data).hexdigest()
        url, got = ok(peer.gfal("gfal-sum", peer.url(name, "davs"), algorithm)).split()
        assert (url, got) == (peer.url(name, "davs"), want), name


def test_gfal_sum_sha256_from_drsftp(peers):
    """gfal2 asks ``Want-Digest: SHA256`` and reads only ``SHA256=`` back
    (http/digest.py ALIASES); this XRootD setup offers no SHA-256."""
    drsftp_peer = peers["drsftp"]
    for name in ("a.bin", "empty.dat"):
        want = hashlib.sha256(drsftp_peer.local(name).read_bytes()).hexdigest()
        _url, got = ok(drsftp_peer.gfal("gfal-sum", drsftp_peer.url(name, "davs"), "SHA256")).split()
        assert got == want, name


# -- drsftp's client against XRootD ------------------------------------------------


@pytest.mark.parametrize("streams", [(), ("-P", "4")], ids=["one", "P4"])
def test_drsftp_get_from_xrootd_byte_identical(peers, tmp_path, streams):
    """The HTTP path alone (``--tuning kernel``: no buffer sizing); a file
    larger than a MiB block, a smaller one, an empty one.  XRootD's HEAD
    says nothing of ranges, yet it serves them: ``-P 4`` runs 4 connections
    (the first range tried alone: client/http/fetch.py)."""
    xrd = peers["xrootd"]
    got, reports = tmp_path / "got", tmp_path / "json"
    got.mkdir()
    reports.mkdir()
    for name in ("big.bin", "a.bin", "empty.dat"):
        dest, report = got / name, reports / f"{name}.json"
        ok(drsftp("get", "--tuning", "kernel", "--ca-file", str(xrd.ca.ca), *streams, "--json", str(report),
                  xrd.url(name), str(dest)))
        assert sha256_file(dest) == sha256_file(xrd.local(name)), name
    assert sorted(os.listdir(got)) == ["a.bin", "big.bin", "empty.dat"]
    big = json.loads((reports / "big.bin.json").read_text())
    if streams:
        assert big["streams"] == 4 and big["requests"] >= 4 and big["connections"] >= 4, big
    else:
        assert big["requests"] >= 1 and big["streams"] >= 1


def test_drsftp_put_to_xrootd_byte_identical(peers, tmp_path):
    xrd = peers["xrootd"]
    src = make_file(tmp_path / "src.bin", 4_000_037, seed=31)
    ok(drsftp("put", "--ca-file", str(xrd.ca.ca), str(src), xrd.url("w/drsftp-up.bin")))
    assert sha256_file(xrd.local("w/drsftp-up.bin")) == sha256_file(src)


def test_drsftp_ls_of_xrootd(peers):
    """Names (directories with a slash), and with -l each file's size."""
    xrd = peers["xrootd"]
    names = ok(drsftp("ls", "--ca-file", str(xrd.ca.ca), xrd.url(""))).split()
    assert sorted(names) == sorted(n + "/" if d else n for n, (d, _s) in local_entries(xrd.root, ()).items())
    sizes = {}
    for line in ok(drsftp("ls", "-l", "--ca-file", str(xrd.ca.ca), xrd.url("sub/"))).splitlines():
        kind, size, _date, _time, name = line.split(None, 4)
        sizes[name] = (kind == "dir", int(size))
    assert sizes == local_entries(xrd.local("sub"))
