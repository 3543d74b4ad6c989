"""GridFTP's striping commands (GFD.20 sec. 5.1-5.2), for a server that is
one stripe: SPAS answers with its one listening address, SPOR takes one
address.  Both are MODE E only (GFD.20: "MUST always be used in
conjunction with the extended block mode").

    SPAS [net-prt]                 229-Entering Striped Passive Mode.
                                    h1,h2,h3,h4,p1,p2
                                   229 End
    SPOR <address> [<address>...]  200 PORT Command successful.

An address is RFC 959 4.1.2's ``h1,h2,h3,h4,p1,p2`` or RFC 2428's
``|net-prt|addr|port|`` (what GridFTP's client sends with IPv6 allowed,
and ``SPAS 2``; the net-prt of SPAS only says which families the client
takes, as in GridFTP's server)."""

from __future__ import annotations

import ipaddress

NET_PRT = {"1": 4, "2": 6}  # RFC 2428 sec. 2: network protocol number -> IP version


def host_port(text: str) -> tuple[str, int]:
    """(address, port) from either form; ValueError else."""
    if text and not text[0].isdigit():
        return _extended(text)
    fields = text.split(",")
    if len(fields) != 6 or not all(f.isascii() and f.isdigit() and len(f) <= 3 and int(f) <= 255 for f in fields):
        raise ValueError(f"not h1,h2,h3,h4,p1,p2: {text[:60]!r}")
    nums = [int(f) for f in fields]
    return ".".join(map(str, nums[:4])), nums[4] << 8 | nums[5]


def _extended(text: str) -> tuple[str, int]:
    """RFC 2428 sec. 2: <d>net-prt<d>net-addr<d>tcp-port<d>, any delimiter
    in 33-126 that is no digit."""
    d = text[0]
    parts = text.split(d)
    if not 33 <= ord(d) <= 126 or len(parts) != 5 or parts[0] or parts[4]:
        raise ValueError(f"not |net-prt|address|port|: {text[:60]!r}")
    prt, addr, port = parts[1:4]
    try:
        ip = ipaddress.ip_address(addr)
    except ValueError:
        raise ValueError(f"not an IP address: {addr[:60]!r}") from None
    if NET_PRT.get(prt) != ip.version or not (port.isascii() and port.isdigit() and 0 < int(port) < 65536):
        raise ValueError(f"not |net-prt|address|port|: {text[:60]!r}")
    return str(ip), int(port)


def spor_addresses(arg: str) -> list[tuple[str, int]]:
    """SPOR's argument: addresses separated by spaces, at least one."""
    fields = arg.split()
    if not fields:
        raise ValueError("SPOR wants one or more h1,h2,h3,h4,p1,p2")
    return [host_port(f) for f in fields]


def spas_net_prt(arg: str) -> bool:
    """SPAS's optional argument is a network protocol number (1 or 2)."""
    return arg.strip() in ("",) + tuple(NET_PRT)


def spas_reply(ip: str, port: int) -> str:
    """SPAS's multi-line 229 naming one stripe, as GridFTP's server words
    it: an IPv4 address in RFC 959's form, an IPv6 one in RFC 2428's."""
    if ":" in ip:
        line = f"|2|{ip}|{port}|"
    else:
        line = f"{ip.replace('.', ',')},{port >> 8},{port & 255}"
    return f"229-Entering Striped Passive Mode.\r\n {line}\r\n229 End"
