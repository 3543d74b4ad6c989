"""What an emulated topology is: nodes joined by links, parsed and
validated, no side effects (docs/NETEM.md#topologies).

    --link client-a:rtt=5ms,rate=0  --link a-b:rtt=100ms,rate=1gbit,loss=0.1%,queue=500

Each link is its own LinkSpec (queue, delay, loss and rate, in each
direction); the backend, sysctls and seed belong to the whole topology.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from .errors import NetemUsageError
from .spec import LinkSpec, parse_duration, parse_loss, parse_rate

NODE_RE = re.compile(r"^[a-z][a-z0-9_]{0,11}$")
# addresses: link K is 10.202.K.0/24's .1 and .2, node N's own is 10.203.0.N (plan.py)
MAX_LINKS = 256
MAX_NODES = 254
REQUIRED_KEYS = ("rtt", "rate")
OPTIONAL_KEYS = ("loss", "queue", "jitter")


def check_node(node: str) -> str:
    if not isinstance(node, str) or not NODE_RE.match(node):
        raise NetemUsageError(f"node name must be a lower-case letter followed by up to 11 lower-case "
                              f"letters, digits or underscores, not {node!r}")
    return node


@dataclass(frozen=True)
class Edge:
    """One link of a topology: its two nodes (in the order written) and its spec."""

    a: str
    b: str
    spec: LinkSpec

    @property
    def label(self) -> str:
        return f"{self.a}-{self.b}"


def _parse_queue(text: str) -> int:
    if not re.fullmatch(r"[0-9]{1,7}", text.strip()):
        raise NetemUsageError(f"queue must be a whole number of packets, not {text!r}")
    return int(text)


def parse_edge(text: str) -> Edge:
    """``NODE-NODE:rtt=R,rate=B[,loss=L,queue=Q,jitter=J]`` -> Edge (validated)."""
    ends, sep, settings = str(text).partition(":")
    nodes = ends.split("-")
    if not sep or len(nodes) != 2:
        raise NetemUsageError(f"--link wants NODE-NODE:rtt=R,rate=B[,loss=L,queue=Q,jitter=J], not {text!r}")
    a, b = (check_node(n.strip()) for n in nodes)
    values: dict[str, str] = {}
    for item in settings.split(","):
        key, eq, value = item.partition("=")
        key, value = key.strip(), value.strip()
        if not eq or not value:
            raise NetemUsageError(f"link {a}-{b}: each setting is key=value, not {item.strip()!r}")
        if key not in REQUIRED_KEYS + OPTIONAL_KEYS:
            raise NetemUsageError(f"link {a}-{b}: unknown setting {key!r} (rtt, rate, loss, queue, jitter)")
        if key in values:
            raise NetemUsageError(f"link {a}-{b}: {key} is given twice")
        values[key] = value
    missing = [k for k in REQUIRED_KEYS if k not in values]
    if missing:
        raise NetemUsageError(f"link {a}-{b}: {' and '.join(missing)} must be given (rate=0 for unlimited)")
    try:
        spec = LinkSpec(
            rtt=parse_duration(values["rtt"]), rate=parse_rate(values["rate"]),
            loss=parse_loss(values.get("loss", "0")), jitter=parse_duration(values.get("jitter", "0")),
            queue=_parse_queue(values["queue"]) if "queue" in values else None,
        )
    except NetemUsageError as exc:
        raise NetemUsageError(f"link {a}-{b}: {exc}") from None
    return make_edge(a, b, spec)


def make_edge(a: str, b: str, spec: LinkSpec) -> Edge:
    check_node(a)
    check_node(b)
    if a == b:
        raise NetemUsageError(f"link {a}-{b} joins a node to itself")
    try:
        spec.validate()
    except NetemUsageError as exc:
        raise NetemUsageError(f"link {a}-{b}: {exc}") from None
    return Edge(a, b, spec)


@dataclass(frozen=True)
class TopologySpec:
    links: tuple[Edge, ...]
    backend: str = "auto"  # auto | tc | tun, for every link
    sysctls: dict = field(default_factory=dict)  # applied on every node
    seed: int | None = None

    def validate(self) -> TopologySpec:
        if not self.links:
            raise NetemUsageError("a topology needs at least one --link")
        if len(self.links) > MAX_LINKS:
            raise NetemUsageError(f"a topology has at most {MAX_LINKS} links, not {len(self.links)}")
        seen: set[frozenset[str]] = set()
        for edge in self.links:
            make_edge(edge.a, edge.b, edge.spec)
            pair = frozenset((edge.a, edge.b))
            if pair in seen:
                raise NetemUsageError(f"nodes {edge.a} and {edge.b} are linked twice")
            seen.add(pair)
        if len(self.nodes) > MAX_NODES:
            raise NetemUsageError(f"a topology has at most {MAX_NODES} nodes, not {len(self.nodes)}")
        # the topology-wide settings, checked by LinkSpec's own rules
        LinkSpec(backend=self.backend, sysctls=self.sysctls, seed=self.seed).validate()
        return self

    @property
    def nodes(self) -> list[str]:
        """Every node, in the order first named."""
        out: list[str] = []
        for edge in self.links:
            out += [n for n in (edge.a, edge.b) if n not in out]
        return out

    def as_dict(self) -> dict:
        return {
            "links": [{"a": e.a, "b": e.b, "spec": link_fields(e.spec)} for e in self.links],
            "backend": self.backend, "sysctls": dict(self.sysctls), "seed": self.seed,
        }

    @classmethod
    def from_dict(cls, d: dict) -> TopologySpec:
        links = tuple(Edge(e["a"], e["b"], LinkSpec(**e["spec"])) for e in d["links"])
        return cls(links=links, backend=d["backend"], sysctls=dict(d["sysctls"]), seed=d["seed"]).validate()


def link_fields(spec: LinkSpec) -> dict:
    """What one link's spec holds (the backend, sysctls and seed are the topology's)."""
    return {"rtt": spec.rtt, "rate": spec.rate, "queue": spec.queue, "loss": spec.loss, "jitter": spec.jitter}
