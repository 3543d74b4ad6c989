"""Who may be at the other end of a server-to-server transfer: the
``--third-party-peers`` list both fronts check (FTP's data connections:
server/ftp/thirdparty.py; HTTP COPY's remotes: server/http/tpc/guard.py),
and the checks of the addresses a server names for its data
(docs/SECURITY.md; RFC 2577 sec. 3).  Pure: config.py reads the options
with these, without the FTP server's imports."""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable

IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network


def plain_ip(ip: str) -> str:
    """``ip`` without an IPv4-mapped IPv6 prefix (::ffff:a.b.c.d)."""
    return ip.removeprefix("::ffff:")


class PeerList:
    """The addresses ``--third-party-peers`` allows (IPv4/IPv6 addresses and
    CIDR networks); empty: none."""

    def __init__(self, networks: Iterable[IPNetwork] = ()) -> None:
        self.networks = tuple(networks)

    def __bool__(self) -> bool:
        return bool(self.networks)

    def __contains__(self, ip: object) -> bool:
        try:
            addr = ipaddress.ip_address(plain_ip(str(ip)))
        except ValueError:
            return False
        return any(addr.version == net.version and addr in net for net in self.networks)

    def __repr__(self) -> str:
        return f"PeerList({', '.join(str(n) for n in self.networks)})"


def parse_peers(value: str | list) -> PeerList:
    """``ADDR|CIDR,...`` (a string) or a list of them (TOML); ValueError
    with one sentence for anything else.  A network must be written by its
    first address (10.0.0.0/24, not 10.0.0.7/24), and one that holds every
    address (0.0.0.0/0, ::/0) is refused: the permission is meant to name
    peers."""
    items = value.split(",") if isinstance(value, str) else value
    networks = []
    for item in items:
        if not isinstance(item, str):
            raise ValueError(f"must list addresses or networks as strings, not {item!r}")
        text = item.strip()
        if not text:
            if isinstance(value, str):
                continue  # "a,,b" or an empty string: nothing between the commas
            raise ValueError("must not hold an empty entry")
        try:
            net = ipaddress.ip_network(plain_ip(text), strict=True)
        except ValueError as exc:
            if "has host bits set" in str(exc):
                first = ipaddress.ip_network(plain_ip(text), strict=False)
                raise ValueError(f"names the network {text!r} by an address inside it: write {first}") from None
            raise ValueError(f"must list IPv4/IPv6 addresses or networks (CIDR, such as 192.0.2.0/24),"
                             f" not {text!r}") from None
        if net.prefixlen == 0:
            raise ValueError(f"{text} would allow every address: name the peers' addresses or networks")
        networks.append(net)
    return PeerList(networks)


def address_problem(value: str, ipv4_only: bool = False) -> str | None:
    """What is wrong with ``value`` as --data-interface/--masquerade-address
    (None: nothing)."""
    try:
        addr = ipaddress.ip_address(value.strip())
    except ValueError:
        want = "an IPv4 address" if ipv4_only else "an IPv4 or IPv6 address"
        return f"must be {want}, not {value!r}"
    if ipv4_only and addr.version != 4:
        return f"must be an IPv4 address (PASV names IPv4 addresses only), not {value!r}"
    if addr.is_unspecified or addr.is_multicast:
        return f"must name one interface's address, not {value}"
    return None


def advertised_address(masquerade: str | None, data_interface: str | None) -> str | None:
    """What PASV names (pyftpdlib's masquerade_address): the NAT's address,
    else an IPv4 data interface, else None (the control connection's)."""
    if masquerade:
        return masquerade
    if data_interface and ipaddress.ip_address(data_interface).version == 4:
        return data_interface
    return None
