"""`--pasv-address`: a server whose data interface is apart from its
control address (`drsftp serve --data-interface`, a DTN's data network)
is reachable by get, put, ls and trees, in stream mode and MODE E; without
the option the client keeps to the control host (RFC 2577 sec. 5) and
says which address PASV named (docs/PROTOCOL.md, "Third-party transfers")."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from conftest import make_file, running_server, sha256_file

DRSFTP = [sys.executable, "-m", "drsftp"]
DATA_IF = "127.0.0.2"  # the server's data interface; the control connection is on 127.0.0.1


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([*DRSFTP, *args], capture_output=True, text=True, timeout=120)


@pytest.fixture
def dtn(tmp_path):
    root = tmp_path / "srv"
    root.mkdir()
    make_file(root / "f.bin", 3_000_017, seed=11)
    (root / "d").mkdir()
    for i in range(3):
        make_file(root / "d" / f"{i}.bin", 100_000 + i, seed=20 + i)
    with running_server(root, "--data-interface", DATA_IF) as srv:
        yield srv


def test_without_the_option_the_client_keeps_to_the_control_host_and_names_pasvs(dtn, tmp_path):
    r = run("get", "-q", dtn.url("f.bin"), str(tmp_path / "out.bin"))
    assert r.returncode == 1
    assert r.stderr.count("\n") == 1 and f"PASV named {DATA_IF}" in r.stderr and "--pasv-address" in r.stderr
    assert "Traceback" not in r.stderr and not os.path.exists(tmp_path / "out.bin")


@pytest.mark.parametrize("streams", ["1", "3"])
def test_get_and_put_reach_the_data_interface(dtn, tmp_path, streams):
    src = os.path.join(dtn.root, "f.bin")
    out = tmp_path / "out.bin"
    r = run("get", "--pasv-address", "-P", streams, "-q", dtn.url("f.bin"), str(out))
    assert r.returncode == 0, r.stderr
    assert sha256_file(out) == sha256_file(src)
    r = run("put", "--pasv-address", "-P", streams, "-q", str(out), dtn.url(f"up{streams}.bin"))
    assert r.returncode == 0, r.stderr
    assert sha256_file(os.path.join(dtn.root, f"up{streams}.bin")) == sha256_file(src)


def test_ls_and_trees_reach_the_data_interface(dtn, tmp_path):
    r = run("ls", "--pasv-address", dtn.url("d/"))
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["0.bin", "1.bin", "2.bin"]
    r = run("get", "-r", "--pasv-address", "-q", dtn.url("d/"), str(tmp_path / "d"))
    assert r.returncode == 0, r.stderr
    for i in range(3):
        assert sha256_file(tmp_path / "d" / f"{i}.bin") == sha256_file(os.path.join(dtn.root, "d", f"{i}.bin"))
