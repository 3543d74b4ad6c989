"""`drsftp get/put -P 4` across an emulated WAN (`drsftp netem`): the MODE E
get's PORT names the client namespace's address (the control connection's
local address), the server connects its streams there; the ranged fallback
against stock pyftpdlib.  Needs root and network namespaces (fails, never
skips, without them)."""

import json
import os
import re
import subprocess
import sys

import pytest
from conftest import PASSWORD, PY, USER, make_file, running_server, sha256_file

from drsftp.netem.link import Link

pytestmark = pytest.mark.root
MiB = 1 << 20


@pytest.fixture(autouse=True)
def need_root():
    if os.geteuid() != 0:
        pytest.fail("needs root and network namespaces (CI runs as root)")


def _drsftp():
    return [sys.executable, "-m", "drsftp"]


def test_parallel_get_and_put_across_namespaces(tmp_path):
    root = tmp_path / "srv"
    root.mkdir()
    src = make_file(root / "w.bin", 16 * MiB + 7, seed=30)
    with Link(rtt=0.02, rate=200e6) as link:
        with running_server(root, "--host", link.server_addr, ns_prefix=link.command("server", [])) as srv:
            url = f"ftp://{USER}:{PASSWORD}@{link.server_addr}:{srv.port}/"
            dest = tmp_path / "w.bin"
            r = link.run("client", [*_drsftp(), "get", "-P", "4", url + "w.bin", str(dest),
                                    "--json", str(tmp_path / "g.json")], timeout=120)
            assert r.returncode == 0, r.stderr
            g = json.loads((tmp_path / "g.json").read_text())
            assert g["mode"] == "E" and g["streams"] == 4 and g["rtt_min_ms"] >= 19
            assert sha256_file(dest) == sha256_file(src)
            r = link.run("client", [*_drsftp(), "put", "-P", "4", str(dest), url + "up.bin",
                                    "--json", str(tmp_path / "p.json")], timeout=120)
            assert r.returncode == 0, r.stderr
            p = json.loads((tmp_path / "p.json").read_text())
            assert p["mode"] == "E" and p["streams"] == 4
            assert sha256_file(root / "up.bin") == sha256_file(src)

        stock = link.popen("server", [PY, "-m", "pyftpdlib", "-i", link.server_addr, "-p", "0", "-d", str(root),
                                      "-u", USER, "-P", PASSWORD],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        try:
            port = None
            for _ in range(50):
                m = re.search(r"starting FTP server on [\d.]+:(\d+)", stock.stdout.readline())
                if m:
                    port = int(m.group(1))
                    break
            assert port, "stock pyftpdlib did not start"
            out = tmp_path / "r.bin"
            r = link.run("client", [*_drsftp(), "get", "-P", "4",
                                    f"ftp://{USER}:{PASSWORD}@{link.server_addr}:{port}/w.bin", str(out),
                                    "--json", str(tmp_path / "r.json")], timeout=120)
            assert r.returncode == 0, r.stderr
            assert json.loads((tmp_path / "r.json").read_text())["mode"] == "ranged"
            assert sha256_file(out) == sha256_file(src)
        finally:
            stock.terminate()
            stock.wait(10)
            stock.stdout.close()
