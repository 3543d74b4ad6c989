"""GridFTP's striping commands (GFD.20 sec. 5.1-5.2), for a server that is
one stripe: SPAS answers with its one listening address, SPOR takes one
address.  Both are MODE E only (GFD.20: "MUST always be used in
conjunction with the extended block mode").

    SPAS [net-prt]                 229-Entering Striped Passive Mode.
                                    h1,h2,h3,h4,p1,p2    (no net-prt)
                                    |1|addr|port|        (with one)
                                   229 End
    SPOR <address> [<address>...]  200 PORT Command successful.

An address is RFC 959 4.1.2's ``h1,h2,h3,h4,p1,p2`` or RFC 2428's
``|net-prt|addr|port|``.  As in GridFTP's server, a SPAS with a net-prt
(globus-url-copy sends ``SPAS 2`` where IPv6 is allowed) is answered in
RFC 2428's form, one without it in RFC 959's, which has no IPv6."""

from __future__ import annotations

import ipaddress

NET_PRT = {"1": 4, "2": 6}  # RFC 2428 sec. 2: network protocol number -> IP version


class UnknownNetwork(ValueError):
    """An RFC 2428 net-prt other than 1 and 2: 522 (RFC 2428 sec. 2)."""


def host_port(text: str) -> tuple[str, int]:
    """(address, port) from either form; ValueError else."""
    if text and not text[0].isdigit():
        return _extended(text)
    fields = text.split(",")
    if len(fields) != 6 or not all(f.isascii() and f.isdigit() and len(f) <= 3 and int(f) <= 255 for f in fields):
        raise ValueError(f"not h1,h2,h3,h4,p1,p2 nor |net-prt|address|port|: {text[:60]!r}")
    nums = [int(f) for f in fields]
    return ".".join(map(str, nums[:4])), nums[4] << 8 | nums[5]


def _extended(text: str) -> tuple[str, int]:
    """RFC 2428 sec. 2: <d>net-prt<d>net-addr<d>tcp-port<d>, any delimiter
    in 33-126 that is no digit; an IPv4-mapped IPv6 address is its IPv4
    one, a scoped one (fe80::1%eth0) is refused."""
    d = text[0]
    parts = text.split(d)
    if not 33 <= ord(d) <= 126 or len(parts) != 5 or parts[0] or parts[4]:
        raise ValueError(f"not |net-prt|address|port|: {text[:60]!r}")
    prt, addr, port = parts[1:4]
    if prt not in NET_PRT:
        raise UnknownNetwork(f"network protocol {prt[:8]!r} not supported, use (1,2)")
    try:
        ip = ipaddress.ip_address(addr)
    except ValueError:
        raise ValueError(f"not an IP address: {addr[:60]!r}") from None
    if NET_PRT[prt] != ip.version or getattr(ip, "scope_id", None) \
            or not (port.isascii() and port.isdigit() and 0 < int(port) < 65536):
        raise ValueError(f"not |net-prt|address|port|: {text[:60]!r}")
    mapped = getattr(ip, "ipv4_mapped", None)
    return str(mapped or ip), int(port)


def spor_addresses(arg: str) -> list[tuple[str, int]]:
    """SPOR's argument: addresses separated by spaces, at least one."""
    fields = arg.split()
    if not fields:
        raise ValueError("SPOR wants one or more addresses, h1,h2,h3,h4,p1,p2 or |net-prt|address|port|")
    return [host_port(f) for f in fields]


def spas_net_prt(arg: str) -> bool:
    """SPAS's optional argument is a network protocol number (1 or 2)."""
    return arg.strip() in ("",) + tuple(NET_PRT)


def spas_reply(ip: str, port: int, extended: bool) -> str:
    """SPAS's multi-line 229 naming one stripe, worded as GridFTP's server
    words it: RFC 2428's form when ``extended`` (SPAS had a net-prt), else
    RFC 959's (an IPv4 address only)."""
    if extended:
        line = f"|{2 if ':' in ip else 1}|{ip}|{port}|"
    else:
        line = f"{ip.replace('.', ',')},{port >> 8},{port & 255}"
    return f"229-Entering Striped Passive Mode.\r\n {line}\r\n229 End"
