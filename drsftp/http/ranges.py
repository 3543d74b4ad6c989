"""Byte ranges of an HTTP request, sans-IO (RFC 9110 sec. 14).

``Range: bytes=0-99,200-,-50`` asks for parts of a representation whose
size the server knows; :func:`parse_range` turns the header into the
ranges to send (first byte, last byte, both inclusive) or says why it
cannot: a header it does not understand is ignored (the whole file, 200),
ranges that all lie past the end are unsatisfiable (416 with
``Content-Range: bytes */SIZE``).  Overlapping or adjacent ranges are
merged, and a request for more ranges than :data:`MAX_RANGES` is served
whole: RFC 9110 sec. 14.2 lets a server ignore a Range it finds abusive
(many small or overlapping ranges cost far more than the bytes they ask).
"""

from __future__ import annotations

from dataclasses import dataclass

MAX_RANGES = 64  # ranges one request may ask for before it gets the whole file
MAX_HEADER = 4096  # characters of a Range header parsed at most


@dataclass(frozen=True)
class ByteRange:
    first: int
    last: int  # inclusive

    @property
    def length(self) -> int:
        return self.last - self.first + 1

    def content_range(self, size: int) -> str:
        """The Content-Range value of this part (RFC 9110 sec. 14.4)."""
        return f"bytes {self.first}-{self.last}/{size}"


class Unsatisfiable(ValueError):
    """No range of the request overlaps the representation: 416."""

    def __init__(self, size: int) -> None:
        super().__init__(f"no requested range lies within the {size} bytes")
        self.size = size

    @property
    def content_range(self) -> str:
        return f"bytes */{self.size}"


def parse_range(header: str | None, size: int) -> list[ByteRange] | None:
    """The ranges of ``header`` within ``size`` bytes, merged and in order;
    None to send the whole representation (no header, a unit other than
    bytes, a malformed or abusive header); raises :class:`Unsatisfiable`
    when every range lies past the end."""
    if header is None or len(header) > MAX_HEADER:
        return None
    unit, sep, spec = header.strip().partition("=")
    if not sep or unit.strip().lower() != "bytes":
        return None
    wanted: list[tuple[int, int]] = []
    parts = spec.split(",")
    if len(parts) > MAX_RANGES:
        return None
    for part in parts:
        part = part.strip()
        if not part:
            continue  # RFC 9110's list rule allows empty elements
        first_text, dash, last_text = part.partition("-")
        if not dash or not _digits(first_text, True) or not _digits(last_text, True) or (
                not first_text and not last_text):
            return None
        if not first_text:  # a suffix: the last N bytes
            n = int(last_text)
            if n == 0:
                continue  # nothing asked: unsatisfiable unless another range is
            wanted.append((max(size - n, 0), size - 1))
            continue
        first = int(first_text)
        if last_text and int(last_text) < first:
            return None  # invalid (RFC 9110 sec. 14.1.1): the header is ignored
        if first >= size:
            continue  # past the end: unsatisfiable unless another range is
        wanted.append((first, min(int(last_text), size - 1) if last_text else size - 1))
    if not wanted:
        raise Unsatisfiable(size)
    return _merge(wanted)


def _digits(text: str, empty_ok: bool) -> bool:
    return (empty_ok and text == "") or (text.isascii() and text.isdigit() and len(text) <= 19)


def _merge(ranges: list[tuple[int, int]]) -> list[ByteRange]:
    out: list[list[int]] = []
    for first, last in sorted(ranges):
        if out and first <= out[-1][1] + 1:
            out[-1][1] = max(out[-1][1], last)
        else:
            out.append([first, last])
    return [ByteRange(first, last) for first, last in out]


def multipart_head(boundary: str, part: ByteRange, size: int, content_type: str) -> bytes:
    """What precedes one part of a multipart/byteranges body (RFC 9110 sec. 14.6)."""
    return (f"\r\n--{boundary}\r\nContent-Type: {content_type}\r\n"
            f"Content-Range: {part.content_range(size)}\r\n\r\n").encode("ascii")


def multipart_tail(boundary: str) -> bytes:
    return f"\r\n--{boundary}--\r\n".encode("ascii")


def multipart_length(boundary: str, parts: list[ByteRange], size: int, content_type: str) -> int:
    """The Content-Length of the multipart/byteranges body of ``parts``."""
    return sum(len(multipart_head(boundary, p, size, content_type)) + p.length for p in parts) + len(
        multipart_tail(boundary))
