"""A WebDAV directory listing, sans-IO: the ``PROPFIND`` request body and a
streamed parser of its ``207 Multi-Status`` answer (RFC 4918 sec. 9.1,
13, 14).  Bytes go in as they arrive and each ``response`` element comes
out as an :class:`Entry`, then is dropped: a directory of a million files
costs one entry's memory at a time."""

from __future__ import annotations

import email.utils
import urllib.parse
import xml.etree.ElementTree as ET
from dataclasses import dataclass

DAV = "{DAV:}"
MAX_BYTES = 1 << 30  # a listing larger than this is refused (a server streaming without end)

PROPFIND_BODY = (b'<?xml version="1.0" encoding="utf-8"?>\n<D:propfind xmlns:D="DAV:"><D:prop>'
                 b"<D:resourcetype/><D:getcontentlength/><D:getlastmodified/></D:prop></D:propfind>")


class ListingError(ValueError):
    pass


@dataclass(frozen=True)
class Entry:
    path: str  # percent-decoded, from the href; a collection's without its trailing /
    is_dir: bool
    size: int | None
    mtime: float | None  # seconds since the epoch

    @property
    def name(self) -> str:
        return self.path.rstrip("/").rpartition("/")[2]


class MultistatusParser:
    def __init__(self) -> None:
        self._parser: ET.XMLPullParser[ET.Element] = ET.XMLPullParser(events=("end",))
        self._seen = 0

    def feed(self, data: bytes) -> list[Entry]:
        """The entries ``data`` completes; malformed XML raises ListingError."""
        self._seen += len(data)
        if self._seen > MAX_BYTES:
            raise ListingError(f"the listing is larger than {MAX_BYTES >> 20} MiB")
        try:
            self._parser.feed(data)
            return self._entries()
        except ET.ParseError as exc:
            raise ListingError(f"the server's listing is not well-formed XML: {exc}") from exc

    def close(self) -> list[Entry]:
        try:
            self._parser.close()
            return self._entries()
        except ET.ParseError as exc:
            raise ListingError(f"the server's listing ends early: {exc}") from exc

    def _entries(self) -> list[Entry]:
        out = []
        for _event, elem in self._parser.read_events():  # type: ignore[misc]  # ("end" events: pairs)
            if isinstance(elem, ET.Element) and elem.tag == DAV + "response":
                entry = _entry(elem)
                elem.clear()  # (what was parsed of it is dropped)
                if entry is not None:
                    out.append(entry)
        return out


def _entry(response: ET.Element) -> Entry | None:
    href = response.findtext(DAV + "href")
    if not href:
        return None
    path = urllib.parse.unquote(urllib.parse.urlsplit(href.strip()).path)
    is_dir, size, mtime = path.endswith("/"), None, None
    for propstat in response.iter(DAV + "propstat"):
        if " 200 " not in f" {propstat.findtext(DAV + 'status') or ''} ":
            continue
        prop = propstat.find(DAV + "prop")
        if prop is None:
            continue
        kind = prop.find(DAV + "resourcetype")
        if kind is not None and kind.find(DAV + "collection") is not None:
            is_dir = True
        length = (prop.findtext(DAV + "getcontentlength") or "").strip()
        if length.isdigit() and len(length) <= 19:
            size = int(length)
        mtime = _http_date(prop.findtext(DAV + "getlastmodified")) or mtime
    return Entry(path.rstrip("/") or "/", is_dir, None if is_dir else size, mtime)


def _http_date(text: str | None) -> float | None:
    """An IMF-fixdate (RFC 9110 sec. 5.6.7) as seconds; None if malformed."""
    if not text:
        return None
    try:
        return email.utils.parsedate_to_datetime(text.strip()).timestamp()
    except (TypeError, ValueError, IndexError):
        return None
