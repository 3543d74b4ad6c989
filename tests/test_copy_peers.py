"""`drsftp copy` between real peers on loopback (docs/THIRDPARTY.md, "What
each server needs"): two globus-gridftp-servers (stream mode, extended
block mode with 4 streams, a tree on cached data channels), two vsftpd
(the source with ``port_promiscuous=YES`` as vsftpd documents for
third-party transfers; --continue from the prefix the destination holds;
a destination that refuses PASV turns the direction round), and drsftp
serve with GridFTP either way.  Every copy compared byte for byte.  A
missing peer program fails the test."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess

from conftest import drsftp, make_file, running_server, sha256_file, wait_until
from test_parallel_peers import VSFTPD, _free_port, _listening, gridftp_server

from drsftp.netem.link import stop_process

MiB = 1 << 20


def _copy(src, dst, *extra, out=None):
    args = ["copy", src, dst, "--progress", "never", *extra] + (["--json", str(out)] if out else [])
    r = drsftp(*args, timeout=120)
    assert r.returncode == 0, r.stderr
    if out is None:
        return None
    with open(out) as f:
        return json.load(f)


def _readable(path):
    subprocess.run(["chmod", "-R", "a+rX", str(path)], check=True)  # (GridFTP serves as nobody)


def test_between_two_gridftp_servers(tmp_path):
    with gridftp_server() as (da, pa), gridftp_server() as (db, pb):
        src = make_file(os.path.join(da, "f.bin"), 20 * MiB + 1, seed=31)
        _readable(da)
        a, b = f"ftp://127.0.0.1:{pa}{da}", f"ftp://127.0.0.1:{pb}{db}"
        d = _copy(f"{a}/f.bin", f"{b}/s.bin", out=tmp_path / "s.json")
        assert d["mode"] == "S" and d["note"] == "no DRS relay (source and destination without DRS)"
        d = _copy(f"{a}/f.bin", f"{b}/e.bin", "-P", "4", out=tmp_path / "e.json")
        assert d["mode"] == "E" and d["streams"] == 4
        for name in ("s.bin", "e.bin"):
            assert sha256_file(os.path.join(db, name)) == sha256_file(src)
        # a tree on two pairs, each pair's streams carrying file after file
        for i in range(6):
            os.makedirs(os.path.join(da, "t", "d"), exist_ok=True)
            make_file(os.path.join(da, "t", "d" if i % 2 else "", f"{i}.bin"), 200_000 * i + 1, seed=i)
        _readable(da)
        d = _copy(f"{a}/t/", f"{b}/c/", "-r", "-c", "2", "-P", "2", out=tmp_path / "t.json")
        ok = [f for f in d["files"] if f["status"] == "ok"]
        assert len(ok) == 6 and any(f["cached"] for f in ok)
        r = subprocess.run(["diff", "-r", os.path.join(da, "t"), os.path.join(db, "c")], capture_output=True,
                           text=True)
        assert r.returncode == 0, r.stdout


@contextlib.contextmanager
def _vsftpd(tmp_path, name, *extra):
    """vsftpd, anonymous, as this user, on loopback (no chroot: URLs name
    files by their absolute path): (its directory, port)."""
    assert os.path.exists(VSFTPD), f"{VSFTPD} is missing (Debian: vsftpd)"
    root, empty = tmp_path / f"{name}-root", tmp_path / f"{name}-empty"
    root.mkdir()
    empty.mkdir()
    port = _free_port()
    conf = tmp_path / f"{name}.conf"
    conf.write_text("\n".join([
        "listen=YES", "listen_ipv6=NO", "listen_address=127.0.0.1", f"listen_port={port}", "background=NO",
        "run_as_launching_user=YES", "anonymous_enable=YES", "local_enable=NO", "no_anon_password=YES",
        f"anon_root={root}", f"secure_chroot_dir={empty}", "seccomp_sandbox=NO", "connect_from_port_20=NO",
        "xferlog_enable=NO", "vsftpd_log_file=/dev/null", "dual_log_enable=NO", "syslog_enable=NO", *extra, ""]))
    proc = subprocess.Popen([VSFTPD, str(conf)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        assert wait_until(lambda: _listening(port), 10), "vsftpd did not start"
        yield root, port
    finally:
        stop_process(proc, 10)


WRITABLE = ("write_enable=YES", "anon_upload_enable=YES", "anon_other_write_enable=YES", "anon_umask=022")


def test_between_two_vsftpd(tmp_path):
    # the source connects to the destination's address: vsftpd allows a PORT to an
    # address other than the client's only with port_promiscuous=YES (vsftpd.conf(5))
    with _vsftpd(tmp_path, "a", "port_promiscuous=YES", "pasv_enable=YES") as (ra, pa), \
            _vsftpd(tmp_path, "b", "pasv_enable=YES", *WRITABLE) as (rb, pb):
        src = make_file(ra / "f.bin", 12 * MiB + 3, seed=32)
        a, b = f"ftp://127.0.0.1:{pa}{ra}", f"ftp://127.0.0.1:{pb}{rb}"
        d = _copy(f"{a}/f.bin", f"{b}/g.bin", "-P", "4", out=tmp_path / "v.json")
        assert d["mode"] == "S" and d["passive"] == "destination"  # (no PARALLEL: one stream)
        assert sha256_file(rb / "g.bin") == sha256_file(src)
        with open(src, "rb") as f:  # vsftpd writes in place: what it holds is a prefix
            (rb / "h.bin").write_bytes(f.read(5 * MiB))
        d = _copy(f"{a}/f.bin", f"{b}/h.bin", "--continue", out=tmp_path / "c.json")
        assert d["resumed_from"] == 5 * MiB and d["bytes"] == 7 * MiB + 3
        assert sha256_file(rb / "h.bin") == sha256_file(src)


def test_a_destination_refusing_pasv_turns_the_direction_round(tmp_path):
    with _vsftpd(tmp_path, "a", "pasv_enable=YES") as (ra, pa), \
            _vsftpd(tmp_path, "b", "pasv_enable=NO", "port_promiscuous=YES", *WRITABLE) as (rb, pb):
        src = make_file(ra / "f.bin", 3 * MiB, seed=33)
        d = _copy(f"ftp://127.0.0.1:{pa}{ra}/f.bin", f"ftp://127.0.0.1:{pb}{rb}/g.bin", out=tmp_path / "r.json")
        assert d["passive"] == "source"
        assert sha256_file(rb / "g.bin") == sha256_file(src)


def test_drsftp_serve_and_gridftp_either_way(tmp_path):
    d_root = tmp_path / "d"
    d_root.mkdir()
    src = make_file(d_root / "f.bin", 64 * MiB + 5, seed=34)
    with running_server(d_root) as sd, gridftp_server() as (dg, pg):
        g = f"ftp://127.0.0.1:{pg}{dg}"
        d = _copy(sd.url("f.bin"), f"{g}/g.bin", "-P", "4", out=tmp_path / "x.json")
        assert d["mode"] == "E" and d["note"] == "no DRS relay (destination without DRS)"
        assert d["servers"]["destination"] == []  # (GridFTP is never sent DRS: its FEAT has none)
        assert sha256_file(os.path.join(dg, "g.bin")) == sha256_file(src)
        _readable(dg)
        d = _copy(f"{g}/g.bin", sd.url("back.bin"), "-P", "2", out=tmp_path / "y.json")
        assert d["mode"] == "E" and sha256_file(d_root / "back.bin") == sha256_file(src)


def test_a_pipelined_tree_between_drsftp_serve_and_gridftp_either_way(tmp_path):
    """Each pair's files pipelined on its cached streams (docs/THIRDPARTY.md,
    "Trees"): GridFTP runs the RETRs back to back and a drsftp serve
    destination keeps the next file's blocks for its STOR; drsftp serve as
    the source, GridFTP's STORs one behind its starts."""
    d_root = tmp_path / "d"
    (d_root / "t").mkdir(parents=True)
    for i in range(10):
        make_file(d_root / "t" / f"{i}.bin", 250_000 + i, seed=70 + i)
    with running_server(d_root) as sd, gridftp_server() as (dg, pg):
        g = f"ftp://127.0.0.1:{pg}{dg}"
        d = _copy(sd.url("t/"), f"{g}/t/", "-r", "-c", "1", "-P", "2", out=tmp_path / "to.json")
        ok = [f for f in d["files"] if f["status"] == "ok"]
        assert len(ok) == 10 and all(f["pipelined"] for f in ok) and sum(f["cached"] for f in ok) == 9
        _readable(dg)
        d = _copy(f"{g}/t/", sd.url("back/"), "-r", "-c", "1", "-P", "2", out=tmp_path / "from.json")
        ok = [f for f in d["files"] if f["status"] == "ok"]
        assert len(ok) == 10 and all(f["pipelined"] for f in ok)
        for i in range(10):
            want = sha256_file(d_root / "t" / f"{i}.bin")
            assert sha256_file(os.path.join(dg, "t", f"{i}.bin")) == want == sha256_file(d_root / "back" / f"{i}.bin")
