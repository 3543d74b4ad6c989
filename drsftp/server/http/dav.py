"""The WebDAV methods (RFC 4918): OPTIONS, DELETE, MKCOL, MOVE, PROPFIND.

PROPFIND answers Depth 0 and 1; ``infinity`` (and a missing Depth, which
means it: RFC 4918 sec. 9.1) is 403, as the RFC lets a server refuse it.
Its body is read up to MAX_BODY bytes, must be UTF-8, and is parsed (as
text) by xml.etree only after a DOCTYPE is refused, so no entity is ever
declared, let alone expanded (billion laughs, external entities).  It may
ask for MAX_PROPS distinct properties; those not in PROPS are listed in a
404 propstat.  A collection of more than MAX_ENTRIES entries is 507, never
a listing cut short.
"""

from __future__ import annotations

import logging
import os
import secrets
import stat
import xml.etree.ElementTree as ET
from time import gmtime, strftime

from aiohttp import web

from ...ftp.safepath import listable
from .files import content_type, etag, last_modified
from .paths import Target, inside
from .problem import Problem

# COPY: third-party copy; POST: macaroon requests (docs/HTTP.md, "Third-party copy")
ALLOW = "OPTIONS, GET, HEAD, PUT, DELETE, MKCOL, MOVE, PROPFIND, COPY, POST"
MAX_BODY = 64 * 1024  # bytes of a PROPFIND body
MAX_ENTRIES = 100_000  # entries of one Depth 1 listing (more: 507)
MAX_PROPS, MAX_PROP_CHARS = 64, 4096  # distinct property names one PROPFIND asks for, and their length
DAV = "DAV:"
PROPS = ("resourcetype", "getcontentlength", "getlastmodified", "creationdate", "getetag", "displayname",
         "getcontenttype")
ET.register_namespace("D", DAV)
log = logging.getLogger("drsftp.server")


def options() -> web.Response:
    return web.Response(status=200, headers={"DAV": "1", "Allow": ALLOW, "MS-Author-Via": "DAV"})


def delete(target: Target) -> web.Response:
    if not target.parts:
        raise Problem(403, "the home cannot be deleted.")
    try:
        st = os.lstat(target.fs)
    except FileNotFoundError:
        raise Problem(404, "no such file or collection.") from None
    try:
        if stat.S_ISDIR(st.st_mode):
            os.rmdir(target.fs)
        else:
            os.remove(target.fs)
    except OSError as exc:
        if exc.errno == 39:  # ENOTEMPTY
            raise Problem(409, "the collection is not empty: delete what it holds first.") from None
        raise Problem(403, f"cannot delete it: {exc.strerror}.") from None
    return web.Response(status=204)


def mkcol(request, target: Target) -> web.Response:
    if request.content_length or request.headers.get("Transfer-Encoding"):
        raise Problem(415, "MKCOL takes no body.")
    if os.path.lexists(target.fs):
        raise Problem(405, "something has that name already.", {"Allow": ALLOW})
    if not os.path.isdir(target.parent.fs):
        raise Problem(409, "the parent collection does not exist.")
    try:
        os.mkdir(target.fs)
    except OSError as exc:
        raise Problem(403, f"cannot make the collection: {exc.strerror}.") from None
    return web.Response(status=201, text="created.\n")


def move(request, source: Target, dest: Target, may_delete: bool) -> web.Response:
    """RFC 4918 sec. 9.9: an existing destination is moved aside (a hidden
    name beside it), the source renamed in, then the aside copy deleted; a
    failed rename puts it back, so a refused MOVE loses nothing."""
    if not source.parts or not dest.parts:
        raise Problem(403, "the home cannot be moved, nor anything moved over it.")
    if not os.path.lexists(source.fs):
        raise Problem(404, "no such file or collection.")
    src, dst = _spot(source), _spot(dest)
    if dest.parts[:len(source.parts)] == source.parts or dst.startswith(src + "/"):
        raise Problem(403, "a collection cannot be moved into itself.")
    if dst == src or src.startswith(dst + "/"):  # (RFC 4918 sec. 9.9.4)
        raise Problem(403, "the destination is the source or a collection holding it.")
    if not os.path.isdir(dest.parent.fs):
        raise Problem(409, "the destination's parent collection does not exist.")
    overwrite = request.headers.get("Overwrite", "T").strip().upper()
    if overwrite not in ("T", "F"):
        raise Problem(400, "Overwrite must be T or F.")
    existed = os.path.lexists(dest.fs)
    aside = None
    if existed:
        if overwrite == "F":
            raise Problem(412, "the destination exists and Overwrite is F.")
        # RFC 4918 sec. 9.9.3: overwriting is a DELETE of the destination
        if not may_delete:
            raise Problem(403, "the destination exists: replacing it needs the right to delete.")
        if os.path.isdir(dest.fs) and not os.path.islink(dest.fs) and os.listdir(dest.fs):
            raise Problem(409, "the destination is a collection that is not empty: delete what it holds first.")
        aside = os.path.join(os.path.dirname(dest.fs), f".drsftp-move-{secrets.token_hex(8)}")
        try:
            os.rename(dest.fs, aside)
        except OSError as exc:
            raise Problem(409, f"cannot move the destination aside: {exc.strerror}.") from None
    try:
        os.replace(source.fs, dest.fs)
    except OSError as exc:
        if aside is not None:
            os.replace(aside, dest.fs)
        raise Problem(409, f"cannot move it: {exc.strerror}.") from None
    if aside is not None:
        _discard(aside)
    return web.Response(status=204 if existed else 201)


def _spot(target: Target) -> str:
    """Where ``target`` lies: its parent's real path and its own name (a
    symlink is renamed itself, not what it leads to)."""
    return os.path.join(os.path.realpath(target.parent.fs), target.parts[-1])


def _discard(aside: str) -> None:
    try:
        if os.path.isdir(aside) and not os.path.islink(aside):
            os.rmdir(aside)
        else:
            os.remove(aside)
    except OSError as exc:  # (filled meanwhile): kept, and said
        log.warning("http: MOVE left the replaced destination as %s: %s", aside, exc.strerror)


def wanted(body: bytes) -> list[str] | None:
    """The property names a PROPFIND body asks for, each once; None: all."""
    if not body.strip():
        return None
    try:  # parsed as text: an encoding it declares (UTF-16: no "<!DOCTYPE" bytes to see) is not acted on
        text = body.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise Problem(400, "a PROPFIND body must be UTF-8.") from None
    if "<!DOCTYPE" in text.upper() or "<!ENTITY" in text.upper():
        raise Problem(400, "a PROPFIND body may not declare a DOCTYPE or entities.")
    try:
        root = ET.fromstring(text)
    except ET.ParseError:
        raise Problem(400, "the PROPFIND body is not well-formed XML.") from None
    if root.tag != f"{{{DAV}}}propfind":
        raise Problem(400, "the PROPFIND body is not a DAV:propfind.")
    prop = root.find(f"{{{DAV}}}prop")
    if prop is None:
        return None  # allprop, propname: every property
    names = list(dict.fromkeys(child.tag for child in prop))
    if len(names) > MAX_PROPS or sum(map(len, names)) > MAX_PROP_CHARS:  # each is repeated in every response
        raise Problem(400, f"a PROPFIND may ask for {MAX_PROPS} properties at most, named in {MAX_PROP_CHARS}"
                           " characters.")
    return names


def propfind(request, target: Target, body: bytes) -> web.Response:
    """A multistatus of ``target`` and, at Depth 1, its entries; run in an
    executor thread (a big listing takes seconds)."""
    depth = request.headers.get("Depth", "infinity").strip().lower()
    if depth not in ("0", "1"):
        raise Problem(403, "PROPFIND answers Depth 0 or 1 only (RFC 4918 sec. 9.1).")
    names = wanted(body)
    try:
        st = os.stat(target.fs)
    except FileNotFoundError:
        raise Problem(404, "no such file or collection.") from None
    root = ET.Element(f"{{{DAV}}}multistatus")
    _response(root, target, st, names)
    if depth == "1" and stat.S_ISDIR(st.st_mode):
        try:
            entries = os.listdir(target.fs)
        except OSError as exc:
            raise Problem(403, f"cannot list it: {exc.strerror}.") from None
        if len(entries) > MAX_ENTRIES:  # never a part of the listing, which a client would take for all of it
            raise Problem(507, f"the collection holds more than {MAX_ENTRIES} entries, more than a listing may.")
        not_utf8 = 0
        for name in sorted(entries):
            child = Target(target.home, (*target.parts, name))
            if not _utf8(name):
                not_utf8 += 1  # no URL names it (paths.py): left out, as listable() leaves out CR, LF, NUL
                continue
            if not listable(name) or not inside(target.home, child.fs):
                continue  # a name no request could carry; a symlink leading out of the home
            try:
                _response(root, child, os.stat(child.fs), names)
            except OSError:
                continue  # gone meanwhile, or a dangling symlink
        if not_utf8:
            log.info("http: PROPFIND %s: left out %d name(s) that are not UTF-8", target.href, not_utf8)
    text = b'<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(root)
    return web.Response(status=207, body=text, content_type="application/xml", charset="utf-8")


def _utf8(name: str) -> bool:
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:  # (os.listdir's surrogate escapes)
        return False
    return True


def _response(root: ET.Element, target: Target, st: os.stat_result, names: list[str] | None) -> None:
    is_dir = stat.S_ISDIR(st.st_mode)
    resp = ET.SubElement(root, f"{{{DAV}}}response")
    ET.SubElement(resp, f"{{{DAV}}}href").text = target.quoted(collection=is_dir)
    values = _props(target, st, is_dir)
    asked = [f"{{{DAV}}}{p}" for p in PROPS] if names is None else names
    found = ET.Element(f"{{{DAV}}}prop")
    missing = ET.Element(f"{{{DAV}}}prop")
    for tag in asked:
        local = tag[len(DAV) + 2:] if tag.startswith(f"{{{DAV}}}") else None
        if local in values:
            el = ET.SubElement(found, tag)
            value = values[local]
            if local == "resourcetype":
                if is_dir:
                    ET.SubElement(el, f"{{{DAV}}}collection")
            elif value is not None:
                el.text = value
        else:
            ET.SubElement(missing, tag)
    for prop, status in ((found, "200 OK"), (missing, "404 Not Found")):
        if len(prop):
            ps = ET.SubElement(resp, f"{{{DAV}}}propstat")
            ps.append(prop)
            ET.SubElement(ps, f"{{{DAV}}}status").text = f"HTTP/1.1 {status}"


def _props(target: Target, st: os.stat_result, is_dir: bool) -> dict[str, str | None]:
    values: dict[str, str | None] = {
        "resourcetype": None,
        "getlastmodified": last_modified(st),
        "creationdate": strftime("%Y-%m-%dT%H:%M:%SZ", gmtime(st.st_ctime)),
        "displayname": target.parts[-1] if target.parts else "",
    }
    if not is_dir:
        values.update({"getcontentlength": str(st.st_size), "getetag": etag(st),
                       "getcontenttype": content_type(target.parts[-1])})
    return values

