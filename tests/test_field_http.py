"""The field bench's HTTPS columns (docs/BENCHMARKS.md, "HTTPS"): drsftp's
client and davix-get against `drsftp serve --http-port`, davix-get against
XRootD's XrdHttp, each over TLS with a certificate made for the run."""

import base64
import os
import shutil
import subprocess
import tempfile
from pathlib import Path as FsPath

import pytest
from conftest import Reached, stop_at_run

from drsftp.bench.common import peers
from drsftp.bench.common.tunings import Path
from drsftp.bench.common.xrootd import XRootDSetup, config, xrootd_argv
from drsftp.bench.field import certs
from drsftp.bench.field import run as field

SERVER = "10.201.0.2"


class FakeLink:
    server_addr, client_addr = SERVER, "10.201.0.1"


def _ctx(wl, tmp_path, tls=None):
    src = "/data/big/big.bin" if not wl.tree else "/data/small"
    return field.Ctx(SERVER, src, str(tmp_path / "d"), wl, Path(rate=1e9, rtt=0.1), str(tmp_path / "r.json"), tls)


@pytest.fixture(scope="module")
def tls(tmp_path_factory):
    return certs.make_certs(tmp_path_factory.mktemp("certs"), SERVER)


def test_the_run_certificate_names_the_server_address_and_its_ca_is_hashed_as_openssl_does(tls):
    from cryptography import x509

    leaf = x509.load_pem_x509_certificate(tls.cert.read_bytes())
    ca = x509.load_pem_x509_certificate(tls.ca.read_bytes())
    sans = leaf.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert [str(a) for a in sans.get_values_for_type(x509.IPAddress)] == [SERVER]
    leaf.verify_directly_issued_by(ca)  # raises if the CA did not sign it
    assert tls.key.stat().st_mode & 0o777 == 0o600
    # davix's --capath finds the CA by the name c_rehash would give it
    digest = subprocess.run(["openssl", "x509", "-noout", "-subject_hash", "-in", str(tls.ca)], capture_output=True,
                            text=True, check=True, timeout=30).stdout.strip()
    assert os.listdir(tls.ca_dir) == [f"{digest}.0"]
    verify = subprocess.run(["openssl", "verify", "-CApath", str(tls.ca_dir), str(tls.cert)], capture_output=True,
                            text=True, timeout=30, check=False)
    assert verify.returncode == 0 and verify.stdout.strip().endswith(": OK"), verify.stdout + verify.stderr


def test_https_columns_trust_the_run_ca_and_ask_for_their_connections(tls, tmp_path):
    big = _ctx(field.workload("big"), tmp_path, tls)
    auto = field.ENTRIES["https-Pauto"].client(big)
    assert auto[auto.index("--ca-file") + 1] == str(tls.ca) and auto[auto.index("-P") + 1] == "auto"
    assert auto[-2:] == [f"https://bench:bench-pass@{SERVER}:{peers.HTTPS_PORT}/big.bin", str(tmp_path / "d")]
    p4 = field.ENTRIES["https-P4"].client(big)
    assert p4[p4.index("-P") + 1] == "4"
    tree = field.ENTRIES["https-r"].client(_ctx(field.workload("small"), tmp_path, tls))
    assert "-r" in tree and tree[tree.index("-c") + 1] == "auto"
    assert tree[-2].endswith(":8443/small/") and tree[-1].endswith("/")
    assert not field.ENTRIES["https-r"].files and not field.ENTRIES["https-Pauto"].trees


def test_davix_columns_log_in_up_front_to_drsftp_and_not_at_all_to_xrootd(tls, tmp_path):
    big = _ctx(field.workload("big"), tmp_path, tls)
    drs = field.ENTRIES["davix"].client(big)
    assert drs[:3] == ["davix-get", "--capath", str(tls.ca_dir)]
    basic = drs[drs.index("-H") + 1]
    assert base64.b64decode(basic.removeprefix("Authorization: Basic ")) == b"bench:bench-pass"
    assert drs[-2] == f"https://{SERVER}:8443/big.bin"  # the password never in the URL
    xrd = field.ENTRIES["davix-xrootd"].client(big)
    assert "-H" not in xrd and xrd[-2] == f"https://{SERVER}:{peers.XRD_HTTPS_PORT}/big.bin"
    assert field.ENTRIES["davix-xrootd"].server == "xrootd"
    with pytest.raises(ValueError, match="certificates"):
        field.ENTRIES["davix"].client(_ctx(field.workload("big"), tmp_path))


def test_servers_serve_the_run_certificate(tls, tmp_path):
    argv, port = peers.server_argv("drsftp-https", FakeLink(), "/data/big", str(tmp_path), tls)
    assert port == peers.HTTPS_PORT and argv[argv.index("--http-port") + 1] == str(peers.HTTPS_PORT)
    assert argv[argv.index("--tls-cert") + 1] == str(tls.cert) and argv[argv.index("--host") + 1] == SERVER
    argv, port = peers.server_argv("xrootd", FakeLink(), "/data/big", str(tmp_path), tls)
    assert port == peers.XRD_HTTPS_PORT and argv[-2:] == ["-c", str(tmp_path / "xrootd" / "xrootd.cfg")]
    cfg = (tmp_path / "xrootd" / "xrootd.cfg").read_text()
    assert f"xrd.protocol XrdHttp:{peers.XRD_HTTPS_PORT} libXrdHttp.so" in cfg
    assert "oss.localroot /data/big" in cfg and "xrd.allow" not in cfg  # its namespace admits the client
    with pytest.raises(ValueError, match="needs a TLS certificate"):
        peers.server_argv("xrootd", FakeLink(), "/data/big", str(tmp_path))
    with pytest.raises(ValueError, match="unknown server"):
        peers.server_argv("nginx", FakeLink(), "/data/big", str(tmp_path), tls)


def test_xrootd_gets_its_own_copy_of_the_tls_files_and_runs_as_nobody_under_root(tls, tmp_path):
    setup = XRootDSetup(1094, 8444, tmp_path / "root", tmp_path / "x", tls)
    argv = xrootd_argv(setup)
    assert (argv[1:3] == ["-R", "nobody"]) == (os.geteuid() == 0)
    key = tmp_path / "x" / "tls" / "key.pem"
    assert key.read_bytes() == tls.key.read_bytes() and key.stat().st_mode & 0o777 == 0o600
    if os.geteuid() == 0:
        import pwd

        assert key.stat().st_uid == pwd.getpwnam("nobody").pw_uid
    text = (tmp_path / "x" / "xrootd.cfg").read_text()
    assert f"xrd.tls {key.parent / 'cert.pem'} {key}" in text and "xrd.allow host localhost" in text
    assert text == config(setup, tmp_path / "x" / "adm", certs.TLSFiles(tls.ca, key.parent / "ca-dir",
                                                                      key.parent / "cert.pem", key))


def test_missing_programs_names_davix_and_xrootd(monkeypatch):
    monkeypatch.setattr(field.shutil, "which", lambda p: None)
    monkeypatch.setattr(field.os.path, "exists", lambda p: False)
    assert field.missing_programs(["https-Pauto", "davix", "davix-xrootd"]) == ["davix-get", "xrootd"]
    assert field.missing_programs(["https-r"]) == []


def test_a_byte_changed_in_transit_is_not_a_complete_run(tmp_path):
    wl = field.workload("small", 0.01)
    src, dest = tmp_path / "src", tmp_path / "dest"
    for top in (src, dest):
        top.mkdir()
        for rel, size in wl.files:
            (top / rel).write_bytes(b"x" * size)
    assert field._check(str(src), str(dest), wl) is None
    name = wl.files[-1][0]
    (dest / name).write_bytes(b"x" * (wl.files[-1][1] - 1) + b"y")  # the same size
    assert field._check(str(src), str(dest), wl) == f"{name} differs from the source"


def test_a_run_keeps_how_long_the_clients_last_5_percent_took():
    """The end of an HTTPS -P auto get (stolen ranges on new connections)
    shows in tail_s, read from the client's --json timeline."""
    report = {"bytes": 1000, "seconds": 7.0, "connections": 13, "requests": 20,
              "timeline": [{"t": 1.0, "bytes": 50}, {"t": 5.0, "bytes": 940}, {"t": 5.5, "bytes": 950},
                           {"t": 6.8, "bytes": 990}]}
    assert field._tail_seconds(report) == 1.5
    assert field._tail_seconds({"bytes": 1000, "seconds": 7.0}) is None  # davix: no timeline
    assert {"connections", "requests"} <= set(field.CLIENT_KEYS)


def test_bench_field_composes_the_https_columns(monkeypatch, tmp_path):
    from drsftp.cli import main

    stop_at_run(monkeypatch, tmp_path, (field, "run_field"), (field, "Link"))
    with pytest.raises(Reached) as got:
        main(["bench", "field", "--streams", "auto", "--peers", "https-Pauto,davix,davix-xrootd"])
    assert got.value.args[0].entries == ["drsftp-Pauto", "https-Pauto", "davix", "davix-xrootd"]
    with pytest.raises(Reached) as got:
        main(["bench", "field", "--datasets", "small", "--peers", "https-r"])
    assert got.value.args[0].entries == ["drsftp", "drsftp-r", "https-r"]


@pytest.mark.root
def test_https_columns_run_on_a_link_and_every_file_arrives_byte_identical():
    """Every HTTPS column runs its real programs on a small, fast link; the
    bench compares each file with its source, and removes the run's
    certificates and XRootD's files at the end."""
    for program in ("davix-get", "xrootd"):
        assert shutil.which(program), f"{program} is missing (Debian: davix, xrootd-server xrootd-server-plugins)"
    # XRootD runs as nobody and must reach the files: not under pytest's private tmp_path
    work = tempfile.mkdtemp(prefix="drs-field-", dir="/var/tmp")
    try:
        os.chmod(work, 0o755)
        cfg = field.FieldConfig(path=Path(rate=200e6, rtt=0.01),
                                entries=["https-Pauto", "https-P4", "davix", "davix-xrootd", "https-r"],
                                workloads=["big", "small"], scale=1 / 64, workdir=work, max_time=60,
                                log=lambda s: None)
        results = field.run_field(cfg)
        left = sorted(os.listdir(work))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    assert [(r["entry"], r["workload"]) for r in results] == [
        ("https-Pauto", "big"), ("https-P4", "big"), ("davix", "big"), ("davix-xrootd", "big"), ("https-r", "small")]
    for r in results:
        assert r["complete"], {k: r.get(k) for k in ("entry", "error", "seconds")}
        assert r["mbps"] > 0 and r["streams_max"] >= 1, r
    # drsftp's clients report their connections and the time of their last 5%
    assert results[0]["client_report"]["connections"] >= 1 and results[0]["client_report"]["tail_s"] >= 0
    assert results[0]["bytes"] == 8 << 20 and results[-1]["files"] == 3
    assert "certs" not in left and "xrootd" not in left
    assert FsPath(work).exists() is False
