"""Python API: an emulated topology (nodes joined by links) as a context manager.

    with Topology(["client-a:rtt=5ms,rate=0", "client-b:rtt=5ms,rate=0",
                   "a-b:rtt=100ms,rate=1gbit"]) as topo:
        topo.popen("b", ["iperf3", "-s", "-B", topo.addr("b", "a")])
        topo.run("a", ["iperf3", "-c", topo.addr("b", "a")], timeout=60)

Each node is a namespace, each link its own queue, delay and loss in each
direction; only directly linked nodes reach each other
(docs/NETEM.md#topologies).  Everything it made (namespaces, devices, the
owner process, processes started with popen) is gone when the block ends,
on error or Ctrl-C too.
"""

from __future__ import annotations

from collections.abc import Iterable

from .errors import NetemError
from .link import Emulated
from .plan import topology_plan
from .tcnetem import read_wire_stats
from .topospec import Edge, TopologySpec, check_node, parse_edge


class Topology(Emulated):
    def __init__(self, links: Iterable[str | Edge], *, backend: str = "auto", sysctls: dict | None = None,
                 name: str | None = None, seed: int | None = None) -> None:
        """``links``: ``"NODE-NODE:rtt=R,rate=B[,loss=L,queue=Q,jitter=J]"`` as
        `drsftp netem up --link` takes them, or Edge(a, b, LinkSpec(...))."""
        edges = tuple(parse_edge(x) if isinstance(x, str) else x for x in links)
        super().__init__(TopologySpec(links=edges, backend=backend, sysctls=dict(sysctls or {}),
                                      seed=seed).validate(), name)
        self.plan = topology_plan(self.name, self.spec)

    # -- where things are --------------------------------------------------
    @property
    def nodes(self) -> list[str]:
        return list(self.plan.nodes)

    def _node(self, node: str) -> str:
        if node not in self.plan.nodes:
            check_node(node)
            raise NetemError(f"topology {self.name!r} has no node {node!r} (nodes: {', '.join(self.plan.nodes)})")
        return node

    def addr(self, node: str, peer: str) -> str:
        """The address at which ``peer`` reaches ``node`` (node's end of their link)."""
        address = self.plan.addr(self._node(node), self._node(peer))
        if address is None:
            raise NetemError(f"nodes {node} and {peer} are not linked: only direct neighbours reach each other")
        return address

    def node_addr(self, node: str) -> str:
        """``node``'s loopback address, which each of its direct neighbours reaches over their link."""
        return self.plan.node_addrs[self._node(node)]

    def neighbours(self, node: str) -> list[str]:
        return [peer.node for _own, peer in self.plan.neighbours(self._node(node))]

    def namespace(self, node: str) -> str:
        return self.plan.nodes[self._node(node)]

    def stats(self) -> dict:
        """Every direction's counters, keyed "A>B": the kernel's now (tc),
        the forwarder's of at most 0.5 s ago (tun)."""
        if self.backend == "tc" and self._owner is not None:
            return read_wire_stats(self.info["links"])
        return self._read_stats() or {}
