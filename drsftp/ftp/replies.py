"""FTP reply parsing (RFC 959 sec. 4.2), sans-IO.

A reply is one line ``ddd text`` or several lines opened by ``ddd-`` and
closed by a line starting with the same ``ddd `` (RFC 959 sec. 4.2).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

MAX_LINE = 8192  # a longer line is a broken or hostile peer
MAX_REPLY_LINES = 1000


class ProtocolError(Exception):
    """The peer broke the FTP reply grammar."""


@dataclass(frozen=True)
class Reply:
    code: int
    lines: tuple[str, ...]  # text of each line, code and separator removed

    @property
    def text(self) -> str:
        return "\n".join(self.lines)

    @property
    def first(self) -> str:
        return self.lines[0] if self.lines else ""

    @property
    def preliminary(self) -> bool:  # 1yz: another reply follows (sec. 4.2)
        return 100 <= self.code < 200

    @property
    def ok(self) -> bool:
        return 200 <= self.code < 400

    def __str__(self) -> str:
        return f"{self.code} {self.first}"


_CODE = re.compile(rb"^([1-5]\d\d)([ -])(.*)$", re.S)


class ReplyParser:
    """Feed bytes from the control connection; get complete replies."""

    def __init__(self) -> None:
        self._buf = bytearray()
        self._open: tuple[int, list[str]] | None = None

    def feed(self, data: bytes) -> list[Reply]:
        self._buf += data
        out: list[Reply] = []
        while True:
            nl = self._buf.find(b"\n")
            if nl < 0:
                if len(self._buf) > MAX_LINE:
                    raise ProtocolError("reply line too long")
                return out
            raw = bytes(self._buf[:nl]).rstrip(b"\r")
            del self._buf[: nl + 1]
            reply = self._line(raw)
            if reply is not None:
                out.append(reply)

    def _line(self, raw: bytes) -> Reply | None:
        if len(raw) > MAX_LINE:
            raise ProtocolError("reply line too long")
        m = _CODE.match(raw)
        text = (m.group(3) if m else raw).decode("utf-8", "replace")
        if self._open is None:
            if not m:
                raise ProtocolError(f"not an FTP reply: {raw[:80]!r}")
            code = int(m.group(1))
            if m.group(2) == b"-":
                self._open = (code, [text])
                return None
            return Reply(code, (text,))
        code, lines = self._open
        if m and int(m.group(1)) == code and m.group(2) == b" ":
            self._open = None
            return Reply(code, tuple(lines + [text]))
        lines.append(raw.decode("utf-8", "replace").removeprefix(" "))
        if len(lines) > MAX_REPLY_LINES:
            raise ProtocolError("multi-line reply too long")
        return None


def parse_feat(reply: Reply) -> set[str]:
    """Feature names from a 211 FEAT reply (RFC 2389 sec. 3.2), upper-cased."""
    if reply.code != 211:
        return set()
    feats = set()
    for line in reply.lines[1:-1]:
        word = line.strip().split(" ")[0]
        if word:
            feats.add(word.upper())
    return feats


_EPSV = re.compile(r"\((.)\1\1(\d{1,5})\1\)")
_PASV = re.compile(r"(\d{1,3}),(\d{1,3}),(\d{1,3}),(\d{1,3}),(\d{1,3}),(\d{1,3})")


def parse_epsv(reply: Reply) -> int:
    """Port from ``229 Entering Extended Passive Mode (|||port|)`` (RFC 2428 sec. 3)."""
    m = _EPSV.search(reply.first)
    if reply.code != 229 or not m or not 0 < int(m.group(2)) < 65536:
        raise ProtocolError(f"bad EPSV reply: {reply}")
    return int(m.group(2))


def parse_pasv(reply: Reply) -> tuple[str, int]:
    """(host, port) from ``227 ... (h1,h2,h3,h4,p1,p2)`` (RFC 959 sec. 4.1.2)."""
    m = _PASV.search(reply.first)
    if reply.code != 227 or not m:
        raise ProtocolError(f"bad PASV reply: {reply}")
    nums = [int(x) for x in m.groups()]
    if any(n > 255 for n in nums):
        raise ProtocolError(f"bad PASV reply: {reply}")
    return ".".join(map(str, nums[:4])), nums[4] * 256 + nums[5]
