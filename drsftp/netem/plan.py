"""The objects an emulated network is made of, named and addressed; no side effects.

A two-node link (`Link`, `drsftp netem up NAME`) and a topology
(`Topology`, `--link`) become the same plan: namespaces, one node each,
and wires, each an emulated link between two of them with its own ends
(device, address, MAC) and spec (docs/NETEM.md#topologies):

- two-node: nodes client and server in ``drs-NAME-c``/``drs-NAME-s``,
  one wire, 10.201.0.1 and 10.201.0.2, directions ``c2s`` and ``s2c``;
- topology: node N in ``drs-NAME-N``; wire K (the K-th ``--link``, from
  0) is 10.202.K.1 at its first node and 10.202.K.2 at its second,
  devices ``drsNAME{K:02x}a``/``b``, directions ``A>B`` and ``B>A``; node
  I (from 1, in the order first named) also holds 10.203.0.I on its
  loopback, routed from each direct neighbour over their wire.

Only directly linked nodes reach each other: no default route, no route
to a node that is not a neighbour, no forwarding.
"""

from __future__ import annotations

from dataclasses import dataclass

from .namespaces import CLIENT_ADDR, CLIENT_MAC, SERVER_ADDR, SERVER_MAC, Names
from .spec import LinkSpec
from .topospec import TopologySpec, link_fields


@dataclass(frozen=True)
class WireEnd:
    node: str
    ns: str
    dev: str
    addr: str
    mac: str


@dataclass(frozen=True)
class Wire:
    ends: tuple[WireEnd, WireEnd]
    spec: LinkSpec  # rate, delay, queue, loss, jitter: each direction alike
    directions: tuple[str, str]  # labels of ends[0] -> ends[1] and ends[1] -> ends[0]

    @property
    def label(self) -> str:
        return f"{self.ends[0].node}-{self.ends[1].node}"


@dataclass(frozen=True)
class NetPlan:
    name: str
    topology: bool  # False: the two-node form and its JSON
    nodes: dict[str, str]  # node -> namespace
    wires: tuple[Wire, ...]
    node_addrs: dict[str, str]  # node -> its loopback address (topologies only)
    backend: str
    sysctls: dict
    seed: int | None

    def addr(self, node: str, peer: str) -> str | None:
        """The address at which ``peer`` reaches ``node``: node's end of their wire."""
        for wire in self.wires:
            x, y = wire.ends
            if (x.node, y.node) == (node, peer):
                return x.addr
            if (y.node, x.node) == (node, peer):
                return y.addr
        return None

    def neighbours(self, node: str) -> list[tuple[WireEnd, WireEnd]]:
        """(own end, peer end) of every wire at ``node``."""
        out = []
        for wire in self.wires:
            x, y = wire.ends
            if x.node == node:
                out.append((x, y))
            elif y.node == node:
                out.append((y, x))
        return out

    def node_entries(self) -> dict[str, dict]:
        """``{NODE: {"namespace", "addresses": {PEER: ADDR}[, "address"]}}`` for the JSON."""
        out: dict[str, dict] = {}
        for node, ns in self.nodes.items():
            entry: dict = {"namespace": ns}
            if node in self.node_addrs:
                entry["address"] = self.node_addrs[node]
            entry["addresses"] = {peer.node: own.addr for own, peer in self.neighbours(node)}
            out[node] = entry
        return out

    def wire_entries(self) -> list[dict]:
        out = []
        for wire in self.wires:
            x, y = wire.ends
            out.append({
                "label": wire.label, "nodes": [x.node, y.node],
                "spec": {**link_fields(wire.spec), "queue_packets": wire.spec.queue_packets},
                "addresses": {x.node: x.addr, y.node: y.addr},
                # the direction's sender: its egress is where the tc backend shapes it
                "directions": {wire.directions[0]: {"namespace": x.ns, "device": x.dev},
                               wire.directions[1]: {"namespace": y.ns, "device": y.dev}},
            })
        return out


def two_node_plan(name: str, spec: LinkSpec) -> NetPlan:
    n = Names(name)
    ends = (WireEnd("client", n.ns("client"), n.dev("client"), CLIENT_ADDR, CLIENT_MAC),
            WireEnd("server", n.ns("server"), n.dev("server"), SERVER_ADDR, SERVER_MAC))
    return NetPlan(name=name, topology=False, nodes={"client": ends[0].ns, "server": ends[1].ns},
                   wires=(Wire(ends, spec, ("c2s", "s2c")),), node_addrs={},
                   backend=spec.backend, sysctls=dict(spec.sysctls), seed=spec.seed)


def topology_namespace(name: str, node: str) -> str:
    return f"drs-{name}-{node}"


def topology_plan(name: str, topo: TopologySpec) -> NetPlan:
    nodes = {node: topology_namespace(name, node) for node in topo.nodes}
    wires = []
    for k, edge in enumerate(topo.links):
        ends = tuple(
            # IFNAMSIZ: "drs" + 8 + 2 + 1 = 14 characters at most
            WireEnd(node, nodes[node], f"drs{name}{k:02x}{tag}", f"10.202.{k}.{i + 1}",
                    f"02:d5:01:00:{k:02x}:{i + 1:02x}")  # locally administered, only on our veth pairs
            for i, (node, tag) in enumerate(((edge.a, "a"), (edge.b, "b")))
        )
        wires.append(Wire((ends[0], ends[1]), edge.spec, (f"{edge.a}>{edge.b}", f"{edge.b}>{edge.a}")))
    node_addrs = {node: f"10.203.0.{i + 1}" for i, node in enumerate(topo.nodes)}
    return NetPlan(name=name, topology=True, nodes=nodes, wires=tuple(wires), node_addrs=node_addrs,
                   backend=topo.backend, sysctls=dict(topo.sysctls), seed=topo.seed)
