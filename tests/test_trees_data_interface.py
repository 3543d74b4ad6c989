"""Trees, listings and copies against a server whose data interface is
apart from its control address (`drsftp serve --data-interface`, a DTN):
`ls`, `get -r`, `put -r` and `copy -r` choose EPSV or PASV, and the
address to connect to, by the one rule a single file's transfer takes
(drsftp.client.session.flowctl: EPSV, PASV where it is refused, the
control host unless --pasv-address takes the address PASV names;
docs/DATASETS.md, docs/THIRDPARTY.md).

- On loopback: a server that lists EPSV but refuses it (as drsftp serve
  does off its data interface) has every tree command fall back to PASV,
  pipelined pairs included; a server on 127.0.0.1 with its data interface
  on 127.0.0.2 gets, without --pasv-address, the single file's one
  sentence naming the address PASV gave and the option.
- On the three-node topology (root; fails, never skips, without it): each
  server's control connection on its client link, its data interface on
  its node address; with --pasv-address each tree is byte-identical,
  copy -r's too (the servers' data flows between their data interfaces),
  the client's data connections leaving from its control connection's
  address (its route to a node address starts at its own node address,
  which the server's bounce rule would refuse)."""

from __future__ import annotations

import contextlib
import filecmp
import os
import subprocess
import sys

import pytest
from conftest import PASSWORD, PY, USER, ServerProcess, make_file, running_server
from test_abor_order import held_server

DRSFTP = [sys.executable, "-m", "drsftp"]
DATA_IF = "127.0.0.2"  # the server's data interface on loopback; its control connection is on 127.0.0.1
DEST_IF = "127.0.0.3"  # a copy's destination's
EPSV_REFUSED = "502 EPSV names no address here: use PASV."


def run(*args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([*DRSFTP, *args], capture_output=True, text=True, timeout=timeout)


def make_tree(root) -> None:
    """d/: three files (one empty) and a subdirectory."""
    (root / "d" / "sub").mkdir(parents=True)
    for i, size in enumerate((300_007, 20_000, 0)):
        make_file(root / "d" / f"f{i}.bin", size, seed=60 + i)
    make_file(root / "d" / "sub" / "s.bin", 12_345, seed=70)


def same_tree(left, right) -> bool:
    cmp = filecmp.dircmp(left, right)
    if cmp.left_only or cmp.right_only or cmp.funny_files:
        return False
    _, mismatch, errors = filecmp.cmpfiles(left, right, cmp.common_files, shallow=False)
    return not mismatch and not errors and all(same_tree(os.path.join(left, d), os.path.join(right, d))
                                               for d in cmp.common_dirs)


def url(port: int, path: str, host: str = "127.0.0.1") -> str:
    return f"ftp://{USER}:{PASSWORD}@{host}:{port}/{path}"


# -- a server that lists EPSV and refuses it: every tree command falls back to PASV ---------------
def _refuse_epsv(self, extmode: bool) -> bool:
    """thirdparty.DataPeers.refused_passive as drsftp serve answers off its
    data interface: EPSV refused, PASV answered (here at the control address)."""
    if extmode:
        self.respond(EPSV_REFUSED)
        return True
    return False


def test_trees_fall_back_to_pasv_where_epsv_is_refused(tmp_path):
    ra, rb = tmp_path / "a", tmp_path / "b"
    ra.mkdir()
    rb.mkdir()
    make_tree(ra)
    with held_server(ra, refused_passive=_refuse_epsv) as (pa, *_), \
            held_server(rb, refused_passive=_refuse_epsv) as (pb, *_):
        r = run("ls", url(pa, "d/"))
        assert r.returncode == 0, r.stderr
        assert r.stdout.split() == ["f0.bin", "f1.bin", "f2.bin", "sub/"]
        for extra in ([], ["--stream-mode"]):  # MODE E's cached streams, and stream mode's pipelined pairs
            out = tmp_path / f"got{len(extra)}"
            r = run("get", "-r", "-q", "-c", "2", *extra, url(pa, "d/"), str(out))
            assert r.returncode == 0, r.stderr
            assert same_tree(ra / "d", out)
            r = run("put", "-r", "-q", "-c", "2", *extra, str(ra / "d") + "/", url(pb, f"up{len(extra)}/"))
            assert r.returncode == 0, r.stderr
            assert same_tree(ra / "d", rb / f"up{len(extra)}")
        r = run("copy", "-r", "-q", "--progress", "never", url(pa, "d/"), url(pb, "c/"))
        assert r.returncode == 0, r.stderr
        assert same_tree(ra / "d", rb / "c")


# -- a data interface apart from the control address, on loopback ---------------------------------
@contextlib.contextmanager
def dtn_pair(tmp_path):
    """A (the tree d/) and B, each with a data interface of its own, each
    listing the other's as a third-party peer."""
    ra, rb = tmp_path / "a", tmp_path / "b"
    ra.mkdir()
    rb.mkdir()
    make_tree(ra)
    with running_server(ra, "--data-interface", DATA_IF, "--third-party-peers", DEST_IF) as a, \
            running_server(rb, "--data-interface", DEST_IF, "--third-party-peers", DATA_IF) as b:
        yield a, b


def test_without_pasv_address_trees_fail_as_a_single_file_does(tmp_path):
    """No "server offers no passive mode": PASV after the 502, the control
    host tried (the listener is on the data interface), and the sentence
    names the address PASV gave and the option, as `get FILE` says it."""
    with dtn_pair(tmp_path) as (a, b):
        single = run("get", "-q", a.url("d/f0.bin"), str(tmp_path / "one.bin"))
        runs = {
            "ls": run("ls", a.url("d/")),
            "get -r": run("get", "-r", "-q", a.url("d/"), str(tmp_path / "got")),
            "put -r": run("put", "-r", "-q", str(tmp_path / "a" / "d") + "/", b.url("up/")),
            "copy -r": run("copy", "-r", "-q", "--progress", "never", a.url("d/"), b.url("c/")),
        }
        for r in [single, *runs.values()]:
            assert r.returncode == 1, r.stderr
        assert "PASV named" in single.stderr
        for what, r in runs.items():
            named = DEST_IF if what == "put -r" else DATA_IF
            assert f"PASV named {named}: --pasv-address connects there" in r.stderr, (what, r.stderr)
            assert "502" not in r.stderr and "Traceback" not in r.stderr, (what, r.stderr)
        assert not os.path.exists(b.root + "/c/f0.bin") and not os.path.exists(b.root + "/up/f0.bin")


def test_with_pasv_address_trees_reach_the_data_interface(tmp_path):
    with dtn_pair(tmp_path) as (a, b):
        src = tmp_path / "a" / "d"
        r = run("put", "-r", "-q", "--pasv-address", str(src) + "/", b.url("up/"))
        assert r.returncode == 0, r.stderr
        assert same_tree(src, os.path.join(b.root, "up"))
        r = run("copy", "-r", "-q", "--progress", "never", "--pasv-address", a.url("d/"), b.url("c/"))
        assert r.returncode == 0, r.stderr
        assert same_tree(src, os.path.join(b.root, "c"))


# -- multi-homed servers on separate nodes ---------------------------------------------------------
LINKS = ["client-a:rtt=0.002s,rate=0", "client-b:rtt=0.002s,rate=0", "a-b:rtt=0.010s,rate=0"]


@pytest.mark.root
def test_trees_against_multihomed_servers_on_three_nodes(tmp_path):
    """Each server: control on its end of the client link, data on its node
    address (which the client and the other server reach over their links);
    A's source tree, B the destination."""
    from drsftp.netem.topology import Topology

    ra, rb = tmp_path / "a", tmp_path / "b"
    ra.mkdir()
    rb.mkdir()
    make_tree(ra)
    src = ra / "d"
    with Topology(LINKS) as topo:
        a_data, b_data = topo.node_addr("a"), topo.node_addr("b")
        a_ctl, b_ctl = topo.addr("a", "client"), topo.addr("b", "client")
        servers = []
        try:
            for node, root, ctl, data, peer in (("a", ra, a_ctl, a_data, b_data), ("b", rb, b_ctl, b_data, a_data)):
                servers.append(ServerProcess(root, "--host", ctl, "--data-interface", data,
                                             "--third-party-peers", peer, ns_prefix=topo.command(node, [])))
            a, b = servers

            def client(*args):
                return topo.run("client", [PY, "-m", "drsftp", *args], timeout=60)

            r = client("ls", a.url("d/", a_ctl))
            assert r.returncode == 1 and f"PASV named {a_data}: --pasv-address" in r.stderr, r.stderr
            r = client("ls", "--pasv-address", a.url("d/", a_ctl))
            assert r.returncode == 0, r.stderr  # (its data connection left from the client's control address)
            assert r.stdout.split() == ["f0.bin", "f1.bin", "f2.bin", "sub/"]
            r = client("get", "-q", "--pasv-address", a.url("d/f0.bin", a_ctl), str(tmp_path / "one.bin"))
            assert r.returncode == 0, r.stderr
            assert filecmp.cmp(src / "f0.bin", tmp_path / "one.bin", shallow=False)
            r = client("get", "-r", "-q", "--pasv-address", a.url("d/", a_ctl), str(tmp_path / "got"))
            assert r.returncode == 0, r.stderr
            assert same_tree(src, tmp_path / "got")
            r = client("put", "-r", "-q", "--pasv-address", str(src) + "/", b.url("up/", b_ctl))
            assert r.returncode == 0, r.stderr
            assert same_tree(src, rb / "up")
            r = client("copy", "-r", "-q", "--progress", "never", "--pasv-address", a.url("d/", a_ctl),
                       b.url("c/", b_ctl))
            assert r.returncode == 0, r.stderr
            assert same_tree(src, rb / "c")
            assert any(a_data in line for line in b.stderr_text().splitlines() if " transfer " in line), \
                b.stderr_text()[-2000:]  # B's data came from A's data interface
        finally:
            for srv in servers:
                srv.stop()
