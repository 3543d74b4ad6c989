"""`drsftp copy` between two `drsftp serve` on separate nodes of an
emulated topology (docs/THIRDPARTY.md; docs/NETEM.md, "Topologies"):

    client --2 ms-- A --40 ms, 200 Mbit/s-- B,   client --2 ms-- B

Each server listens on its node address, which the other reaches over the
A-B link, and names the other in --third-party-peers.  The copy is
byte-identical and its --json shows the source reporting the A-B RTT on
its data sockets, not the 2 ms of the client's control connections
(docs/DESIGN.md, "Third-party path").  A source without the option refuses
the PORT to B with the 501 naming it (RFC 2577; docs/PROTOCOL.md, "The
bounce rule").  Needs root and network namespaces: fails, never skips,
without them."""

from __future__ import annotations

import json
import os
import statistics

import pytest
from conftest import PY, ServerProcess, make_file, sha256_file

from drsftp.netem.topology import Topology

MiB = 1 << 20
A_B_RTT, CONTROL_RTT = 0.040, 0.002
LINKS = [f"client-a:rtt={CONTROL_RTT}s,rate=200mbit", f"client-b:rtt={CONTROL_RTT}s,rate=200mbit",
         f"a-b:rtt={A_B_RTT}s,rate=200mbit"]


def _serve(topo, node, root, *extra):
    me = topo.node_addr(node)
    return ServerProcess(root, "--host", me, "--data-interface", me, *extra, ns_prefix=topo.command(node, []))


def _copy(topo, src, dst, *extra):
    return topo.run("client", [PY, "-m", "drsftp", "copy", "--progress", "never", "-P", "4", *extra, src, dst],
                    timeout=60)


@pytest.mark.root
def test_copy_between_two_nodes_sizes_on_the_a_b_path(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))  # MODE E resume records
    ra, rb = tmp_path / "a", tmp_path / "b"
    ra.mkdir()
    rb.mkdir()
    src = make_file(ra / "f.bin", 6 * MiB + 11, seed=41)
    with Topology(LINKS) as topo:
        a_addr, b_addr = topo.node_addr("a"), topo.node_addr("b")
        a = _serve(topo, "a", ra, "--third-party-peers", b_addr)
        b = _serve(topo, "b", rb, "--third-party-peers", a_addr)
        bare = _serve(topo, "a", ra)  # A without --third-party-peers
        try:
            out = tmp_path / "c.json"
            r = _copy(topo, a.url("f.bin", a_addr), b.url("g.bin", b_addr), "--json", str(out))
            assert r.returncode == 0, r.stderr
            assert sha256_file(rb / "g.bin") == sha256_file(src)
            with open(out) as f:
                d = json.load(f)
            assert d["mode"] == "E" and d["streams"] == 4 and d["passive"] == "destination"
            # the source's data sockets report the A-B RTT (40 ms and its queue), not the control RTT
            rtts = [row["rtt_us"] / 1e6 for row in d["servers"]["source"] if row.get("rtt_us")]
            assert rtts, d["servers"]
            assert min(rtts) >= 0.9 * A_B_RTT and statistics.median(rtts) <= 3 * A_B_RTT, rtts
            assert d["rtt_min_ms"] >= 0.9 * A_B_RTT * 1000
            # the destination's log names A's address as the data peer
            assert any(a_addr in line and "streams=4" in line for line in b.stderr_text().splitlines()
                       if " transfer " in line), b.stderr_text()[-2000:]

            r = _copy(topo, bare.url("f.bin", a_addr), b.url("h.bin", b_addr))
            assert r.returncode == 1, r.stderr
            lines = [line for line in r.stderr.splitlines() if line.strip()]
            assert len(lines) == 1 and "Traceback" not in r.stderr, r.stderr
            assert "501" in lines[0] and "--third-party-peers" in lines[0] and b_addr in lines[0], lines[0]
            assert not os.path.exists(rb / "h.bin")
        finally:
            for srv in (a, b, bare):
                srv.stop()
