"""The request headers of an HTTP third-party copy, sans-IO (docs/HTTP.md,
"Third-party copy"; the WLCG HTTP-TPC convention XRootD and dCache follow).

``COPY`` with ``Source: URL`` pulls the remote file into the request's
path; with ``Destination: URL`` it pushes the request's file there.
``TransferHeader<Name>: value`` is sent to the remote as ``<Name>:
value`` (``TransferHeaderAuthorization`` carries the remote's token);
``Credential: none`` is the only delegation mode (XRootD refuses others
likewise: no proxy is delegated); ``Overwrite: F`` refuses an existing
target (RFC 4918 sec. 10.6); ``RequireChecksumVerification: true`` asks
for the remote's digest to be compared; ``X-Number-Of-Streams: N``
(XRootD's header) pulls by N ranged connections at once.
"""

from __future__ import annotations

from collections.abc import Iterable

PREFIX = "transferheader"
CHUNK = 64 << 20  # bytes of one ranged GET at most
MAX_FORWARDED = 32  # TransferHeader fields forwarded at most
# fields the copy itself sets on the remote requests: never taken from the client
OWN = frozenset({"host", "content-length", "transfer-encoding", "connection", "range", "drs", "expect",
                 "upgrade", "te", "keep-alive", "proxy-authorization", "content-range", "want-digest"})


class CopyHeaderError(ValueError):
    """A COPY header that cannot be honoured (the server's 400): one sentence."""


def transfer_headers(items: Iterable[tuple[str, str]]) -> list[tuple[str, str]]:
    """``(Name, value)`` for each ``TransferHeaderName: value`` of the request."""
    out: list[tuple[str, str]] = []
    for key, value in items:
        if not key.lower().startswith(PREFIX):
            continue
        name = key[len(PREFIX):]
        if not name or name.lower() in OWN:
            raise CopyHeaderError(f"{key} would set {name or 'nothing'}, which the copy sets itself")
        if "\r" in value or "\n" in value:
            raise CopyHeaderError(f"{key} holds a line break")
        out.append((name, value))
    if len(out) > MAX_FORWARDED:
        raise CopyHeaderError(f"a COPY forwards {MAX_FORWARDED} TransferHeader fields at most")
    return out


def overwrite(value: str | None) -> bool:
    """RFC 4918 sec. 10.6: T (the default) or F."""
    if value is None:
        return True
    v = value.strip().upper()
    if v not in ("T", "F"):
        raise CopyHeaderError("Overwrite must be T or F")
    return v == "T"


def credential(value: str | None) -> None:
    """Only ``none`` (or no header): this server delegates no proxy."""
    if value is not None and value.strip().lower() != "none":
        raise CopyHeaderError(f"COPY requested an unsupported credential type: {value.strip()[:40]}; only"
                              " 'none' is served here (pass the remote's token in TransferHeaderAuthorization)")


def flag(name: str, value: str | None) -> bool:
    if value is None:
        return False
    v = value.strip().lower()
    if v not in ("true", "false"):
        raise CopyHeaderError(f"{name} must be true or false")
    return v == "true"


def streams(value: str | None, cap: int) -> int:
    """X-Number-Of-Streams: 1 to ``cap`` (a larger number is capped; 0,
    which davix sends when gfal-copy is given no -n, is 1)."""
    if value is None or not value.strip():
        return 1
    v = value.strip()
    if not v.isdigit() or len(v) > 6:
        raise CopyHeaderError("X-Number-Of-Streams must be a whole number")
    return min(max(int(v), 1), max(cap, 1))


def ranges(total: int, first: int = 0, chunk: int = CHUNK) -> list[tuple[int, int]]:
    """``[first, total)`` in pieces of at most ``chunk`` bytes: (start, end) pairs, end exclusive."""
    return [(at, min(at + chunk, total)) for at in range(first, total, chunk)]


def range_header(start: int, end: int) -> str:
    """``bytes=A-B`` of [start, end) (RFC 9110 sec. 14.1.2)."""
    return f"bytes={start}-{end - 1}"
