"""Third-party transfers between `drsftp serve`s, and with
globus-gridftp-server, driven by the field's clients on loopback:
globus-url-copy (stream mode, ``-p 4``, ``-r -fast``), lftp's FXP and
gfal-copy (docs/PROTOCOL.md, "Third-party transfers").  Each server has
a data interface of its own (127.0.0.2, 127.0.0.3, 127.0.0.4) while the
client's control connections come from 127.0.0.1, so every data
connection between two servers is a foreign one, allowed by
``--third-party-peers``.  Every file is compared byte for byte; a missing
program fails the test."""

from __future__ import annotations

import contextlib
import filecmp
import os
import shutil
import subprocess

import pytest
from conftest import PASSWORD, USER, make_file, sha256_file, wait_until
from test_gfal_peer import gfal, ok
from test_parallel_peers import gridftp_server
from test_third_party_server import A_DATA, B_DATA, Server
from test_tls import certs  # noqa: F401 (a fixture)

G_DATA = "127.0.0.4"  # globus-gridftp-server's data interface
SIZE = 6 * (1 << 20) + 777


def guc(*args, timeout=60):
    """globus-url-copy, with its -dbg trace in .log."""
    assert shutil.which("globus-url-copy"), "globus-url-copy is missing (Debian: globus-gass-copy-progs)"
    r = subprocess.run(["globus-url-copy", "-dbg", *args], check=False, capture_output=True, text=True,
                       timeout=timeout)
    r.log = r.stdout + r.stderr
    return r


def drs_url(srv, path):
    return f"ftp://{USER}:{PASSWORD}@127.0.0.1:{srv.port}/{path}"


@contextlib.contextmanager
def two_servers(tmp_path, a_args, b_args):
    """A (source: src.bin and a tree d/) and B, with the options given."""
    ra, rb = tmp_path / "a", tmp_path / "b"
    (ra / "d" / "sub").mkdir(parents=True)
    rb.mkdir()
    make_file(ra / "src.bin", SIZE, seed=21)
    for i, size in enumerate((1_000_003, 250_000, 0)):
        make_file(ra / "d" / f"f{i}.bin", size, seed=30 + i)
    make_file(ra / "d" / "sub" / "s.bin", 12_345, seed=40)
    with contextlib.ExitStack() as stack:
        a = Server(ra, tmp_path / "a.log", *a_args)
        stack.callback(a.stop)
        b = Server(rb, tmp_path / "b.log", *b_args)
        stack.callback(b.stop)
        yield a, b


PAIR = (("--data-interface", A_DATA, "--third-party-peers", B_DATA),
        ("--data-interface", B_DATA, "--third-party-peers", A_DATA))


def same_tree(left, right) -> bool:
    cmp = filecmp.dircmp(left, right)
    if cmp.left_only or cmp.right_only or cmp.funny_files:
        return False
    _, mismatch, errors = filecmp.cmpfiles(left, right, cmp.common_files, shallow=False)
    return not mismatch and not errors and all(same_tree(os.path.join(left, d), os.path.join(right, d))
                                               for d in cmp.common_dirs)


@pytest.mark.parametrize("flags", [[], ["-p", "4"], ["-r", "-cd", "-fast"], ["-r", "-cd", "-fast", "-p", "4"],
                                   ["-stripe", "-p", "4"], ["-r", "-cd", "-fast", "-stripe"], ["-stripe", "-ipv6"]],
                         ids=["stream", "p4", "r-fast", "r-fast-p4", "stripe-p4", "r-fast-stripe", "stripe-ipv6"])
def test_globus_url_copy_between_two_drsftp_serves(tmp_path, flags):
    with two_servers(tmp_path, *PAIR) as (a, b):
        tree = "-r" in flags
        src, dst = ("d/", "d/") if tree else ("src.bin", "dst.bin")
        r = guc(*flags, drs_url(a, src), drs_url(b, dst))
        assert r.returncode == 0, r.log[-3000:]
        if tree:
            assert same_tree(os.path.join(a.root, "d"), os.path.join(b.root, "d"))
        else:
            assert sha256_file(os.path.join(b.root, "dst.bin")) == sha256_file(os.path.join(a.root, "src.bin"))
        want = 4 if "-p" in flags else 1
        if want == 4:
            assert "OPTS RETR Parallelism=4,4,4;" in r.log and "MODE E" in r.log
        if "-stripe" in flags:  # B's SPAS named its one stripe, its data interface (GFD.20 5.1); A took it
            assert ("SPAS 2" in r.log) == ("-ipv6" in flags)  # IPv6 allowed: the client says so to SPAS,
            named = f"|1|{B_DATA}|" if "-ipv6" in flags else f"{B_DATA.replace('.', ',')},"  # and gets RFC 2428's form
            assert f"229-Entering Striped Passive Mode.\n {named}" in r.log
        files = 4 if tree else 1  # d/f0-f2.bin, d/sub/s.bin
        assert wait_until(lambda: len(b.records()) == files and len(a.records()) == files, 10)
        for line in a.records():
            assert (line["data_peer"], line["streams"], line["complete"]) == (B_DATA, want, True), line
        for line in b.records():
            assert (line["data_peer"], line["streams"], line["complete"]) == (A_DATA, want, True), line


@pytest.mark.parametrize("streams", ["1", "4"])
def test_globus_url_copy_pipelined_tree_between_two_drsftp_serves(tmp_path, streams):
    """-r -fast -pp: A runs the pipelined RETRs back to back on the cached
    streams, so B's streams carry the next file's blocks before the STOR
    that takes them (docs/EBLOCK.md, "Pipelined transfers")."""
    with two_servers(tmp_path, *PAIR) as (a, b):
        sizes = [1 << 20] * 12 + [0, 1, 70_000, 3 << 20]
        for i, size in enumerate(sizes):
            make_file(os.path.join(a.root, "d", f"p{i:02d}.bin"), size, seed=50 + i)
        r = guc("-r", "-cd", "-fast", "-pp", "-p", streams, drs_url(a, "d/"), drs_url(b, "d/"), timeout=180)
        assert r.returncode == 0, r.log[-3000:]
        assert same_tree(os.path.join(a.root, "d"), os.path.join(b.root, "d"))
        assert r.log.count("reusing existing data connection") >= 2 * (len(sizes) + 2)  # both ends, most files
        files = len(sizes) + 4
        assert wait_until(lambda: len(b.records()) == files, 10)
        assert all(line["complete"] and line["data_peer"] == A_DATA for line in b.records())


def named(addr, flags):
    """How a passive server's reply names ``addr``: SPAS's continuation line, or PASV's."""
    fields = addr.replace(".", ",")
    return f"229-Entering Striped Passive Mode.\n {fields}," if "-stripe" in flags else f"({fields},"


@pytest.mark.parametrize("flags", [[], ["-p", "4"], ["-stripe", "-p", "4"]], ids=["stream", "p4", "stripe-p4"])
def test_globus_url_copy_between_drsftp_and_gridftp_both_ways(tmp_path, flags):
    """drsftp (A) -> GridFTP: GridFTP passive, A connects to its data
    interface; GridFTP -> drsftp (B): B passive, GridFTP connects."""
    with gridftp_server(G_DATA) as (gdir, gport), two_servers(
            tmp_path, ("--data-interface", A_DATA, "--third-party-peers", G_DATA),
            ("--data-interface", B_DATA, "--third-party-peers", G_DATA)) as (a, b):
        g = f"ftp://127.0.0.1:{gport}{gdir}"
        r = guc(*flags, drs_url(a, "src.bin"), f"{g}/from-drsftp.bin")
        assert r.returncode == 0, r.log[-3000:]
        assert sha256_file(f"{gdir}/from-drsftp.bin") == sha256_file(os.path.join(a.root, "src.bin"))
        assert named(G_DATA, flags) in r.log  # GridFTP's PASV/SPAS named its data interface
        assert wait_until(lambda: a.records(), 10) and a.records()[-1]["data_peer"] == G_DATA
        os.chmod(f"{gdir}/from-drsftp.bin", 0o644)
        r = guc(*flags, f"{g}/from-drsftp.bin", drs_url(b, "from-gridftp.bin"))
        assert r.returncode == 0, r.log[-3000:]
        assert sha256_file(os.path.join(b.root, "from-gridftp.bin")) == sha256_file(os.path.join(a.root, "src.bin"))
        assert named(B_DATA, flags) in r.log  # B's PASV/SPAS named its data interface
        assert wait_until(lambda: b.records(), 10) and b.records()[-1]["complete"]


def lftp(script, timeout=60):
    assert shutil.which("lftp"), "lftp is missing (Debian: lftp)"
    return subprocess.run(["lftp", "-c", script], capture_output=True, text=True, timeout=timeout, check=False,
                          env={**os.environ, "HOME": "/nonexistent"})


@pytest.mark.parametrize("passive_source", [False, True], ids=["destination-passive", "source-passive"])
def test_lftp_fxp_between_two_drsftp_serves(tmp_path, passive_source):
    """lftp's FXP (ftp:use-fxp, forced: no copy through the client).  lftp
    replaces a PASV address in 127/8 other than 127.0.0.1 with the control
    connection's, so the passive server's data interface is 127.0.0.1 here;
    the active one connects from its own, a foreign address."""
    if passive_source:
        args = (("--data-interface", "127.0.0.1", "--third-party-peers", B_DATA), ("--data-interface", B_DATA))
    else:
        args = (("--data-interface", A_DATA), ("--data-interface", "127.0.0.1", "--third-party-peers", A_DATA))
    with two_servers(tmp_path, *args) as (a, b):
        extra = "set ftp:fxp-passive-source true;" if passive_source else ""
        r = lftp(f"set ftp:use-fxp true; set ftp:fxp-force true; {extra} set net:max-retries 1;"
                 f" set net:timeout 15; set xfer:log false;"
                 f" get {drs_url(a, 'src.bin')} -o {drs_url(b, 'dst.bin')}")
        assert r.returncode == 0, r.stderr
        assert sha256_file(os.path.join(b.root, "dst.bin")) == sha256_file(os.path.join(a.root, "src.bin"))
        passive, foreign = (a, B_DATA) if passive_source else (b, A_DATA)
        assert wait_until(lambda: passive.records(), 10)
        assert passive.records()[-1]["data_peer"] == foreign


def test_lftp_fxp_over_tls_with_sscn(tmp_path, certs):  # noqa: F811
    """lftp's FXP between two FTPS servers (PROT P on both): lftp sends
    SSCN ON to the passive one (ftp:fxp-passive-sscn), which takes the TLS
    client's role on the data connection."""
    tls = ("--tls-cert", str(certs.good), "--require-tls")
    with two_servers(tmp_path, ("--data-interface", A_DATA, *tls),
                     ("--data-interface", "127.0.0.1", "--third-party-peers", A_DATA, *tls)) as (a, b):
        r = lftp(f"set ftp:use-fxp true; set ftp:fxp-force true; set ftp:ssl-force true;"
                 f" set ftp:ssl-protect-data true; set ftp:ssl-protect-fxp true; set ssl:ca-file {certs.ca};"
                 f" set net:max-retries 1; set net:timeout 15; set xfer:log false; debug -o {tmp_path}/lftp.log 5;"
                 f" get {drs_url(a, 'src.bin')} -o {drs_url(b, 'dst.bin')}")
        assert r.returncode == 0, r.stderr + (tmp_path / "lftp.log").read_text()[-3000:]
        assert sha256_file(os.path.join(b.root, "dst.bin")) == sha256_file(os.path.join(a.root, "src.bin"))
        trace = (tmp_path / "lftp.log").read_text()
        assert "SSCN ON" in trace and "200 SSCN:CLIENT METHOD" in trace and "PROT P" in trace
        assert wait_until(lambda: b.records(), 10)
        assert (b.records()[-1]["data_peer"], b.records()[-1]["tls"]) == (A_DATA, True)


def test_gfal_copy_between_two_drsftp_serves(tmp_path):
    with two_servers(tmp_path, *PAIR) as (a, b):
        creds = ("-D", f"FTP:USER={USER}", "-D", f"FTP:PASSWORD={PASSWORD}")
        ok(gfal("gfal-copy", *creds, f"ftp://127.0.0.1:{a.port}/src.bin", f"ftp://127.0.0.1:{b.port}/dst.bin"))
        assert sha256_file(os.path.join(b.root, "dst.bin")) == sha256_file(os.path.join(a.root, "src.bin"))
        assert wait_until(lambda: b.records(), 10)
        assert b.records()[-1]["data_peer"] == A_DATA and a.records()[-1]["data_peer"] == B_DATA
