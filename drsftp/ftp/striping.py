"""GridFTP's striping commands (GFD.20 sec. 5.1-5.2), for a server that is
one stripe: SPAS answers with its one listening address, SPOR takes one
address.  Both are MODE E only (GFD.20: "MUST always be used in
conjunction with the extended block mode").

    SPAS                           229-Entering Striped Passive Mode.
                                    h1,h2,h3,h4,p1,p2
                                   229 End
    SPOR h1,h2,h3,h4,p1,p2         200 PORT Command successful.

Host-port fields are RFC 959 4.1.2's (PORT's and PASV's)."""

from __future__ import annotations


def host_port(text: str) -> tuple[str, int]:
    """(IPv4 address, port) from ``h1,h2,h3,h4,p1,p2``; ValueError else."""
    fields = text.split(",")
    if len(fields) != 6 or not all(f.isdigit() and len(f) <= 3 and int(f) <= 255 for f in fields):
        raise ValueError(f"not h1,h2,h3,h4,p1,p2: {text[:60]!r}")
    nums = [int(f) for f in fields]
    return ".".join(map(str, nums[:4])), nums[4] << 8 | nums[5]


def spor_addresses(arg: str) -> list[tuple[str, int]]:
    """SPOR's argument: host-port fields separated by spaces, at least one."""
    fields = arg.split()
    if not fields:
        raise ValueError("SPOR wants one or more h1,h2,h3,h4,p1,p2")
    return [host_port(f) for f in fields]


def spas_reply(ip: str, port: int) -> str:
    """SPAS's multi-line 229 naming one stripe (GridFTP's server words it so)."""
    return f"229-Entering Striped Passive Mode.\r\n {ip.replace('.', ',')},{port >> 8},{port & 255}\r\n229 End"
