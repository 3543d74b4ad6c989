"""drsftp/server/http/dav.py: OPTIONS, DELETE, MKCOL, MOVE and PROPFIND
with the statuses of docs/HTTP.md's table (RFC 4918)."""

from __future__ import annotations

import os
import xml.etree.ElementTree as ET

import pytest
from conftest import USER
from httpserve import AUTH, in_process, raw, run, status
from httpserve import fetch as call

D = "{DAV:}"


@pytest.fixture
def root(tmp_path):
    d = tmp_path / "srv"
    d.mkdir()
    return d


@pytest.fixture
def front(root):
    with in_process(root) as f:
        yield f


def responses(body: bytes) -> dict[str, dict[str, str | None]]:
    """href -> {property: text} of a multistatus (the 200 propstats)."""
    out = {}
    for resp in ET.fromstring(body).findall(f"{D}response"):
        props = {}
        for ps in resp.findall(f"{D}propstat"):
            if ps.findtext(f"{D}status").endswith("200 OK"):
                for el in ps.find(f"{D}prop"):
                    name = el.tag.removeprefix(D)
                    props[name] = "collection" if el.find(f"{D}collection") is not None else el.text
        out[resp.findtext(f"{D}href")] = props
    return out


def test_options(front):
    st, h, _ = run(call(front, "OPTIONS", "/"))
    assert st == 200 and h["DAV"] == "1"
    assert set(h["Allow"].replace(" ", "").split(",")) == {"OPTIONS", "GET", "HEAD", "PUT", "DELETE", "MKCOL",
                                                           "MOVE", "PROPFIND", "COPY", "POST"}


def test_mkcol(front, root):
    assert run(call(front, "MKCOL", "/d"))[0] == 201 and (root / "d").is_dir()
    assert run(call(front, "MKCOL", "/d"))[0] == 405  # exists
    assert run(call(front, "MKCOL", "/x/y"))[0] == 409  # no parent
    assert run(call(front, "MKCOL", "/e", data=b"<x/>"))[0] == 415


def test_delete(front, root):
    (root / "f").write_bytes(b"1")
    (root / "full").mkdir()
    (root / "full" / "g").write_bytes(b"2")
    (root / "empty").mkdir()
    assert run(call(front, "DELETE", "/f"))[0] == 204 and not (root / "f").exists()
    assert run(call(front, "DELETE", "/f"))[0] == 404
    assert run(call(front, "DELETE", "/full"))[0] == 409 and (root / "full" / "g").exists()
    assert run(call(front, "DELETE", "/empty"))[0] == 204 and not (root / "empty").exists()
    assert run(call(front, "DELETE", "/"))[0] == 403


def test_move(front, root):
    (root / "a").write_bytes(b"A")
    (root / "b").write_bytes(b"B")
    (root / "sub").mkdir()
    st, _, _ = run(call(front, "MOVE", "/a", {"Destination": "/sub/a2"}))
    assert st == 201 and (root / "sub" / "a2").read_bytes() == b"A" and not (root / "a").exists()
    st, _, _ = run(call(front, "MOVE", "/sub/a2", {"Destination": front.url("/b"), "Overwrite": "F"}))
    assert st == 412 and (root / "b").read_bytes() == b"B"
    st, _, _ = run(call(front, "MOVE", "/sub/a2", {"Destination": front.url("/b")}))
    assert st == 204 and (root / "b").read_bytes() == b"A"
    assert run(call(front, "MOVE", "/nope", {"Destination": "/c"}))[0] == 404
    assert run(call(front, "MOVE", "/b", {"Destination": "/no/dir/c"}))[0] == 409
    assert run(call(front, "MOVE", "/sub", {"Destination": "/sub/inner"}))[0] == 403
    assert run(call(front, "MOVE", "/b"))[0] == 400  # no Destination
    assert run(call(front, "MOVE", "/b", {"Destination": "/../../escape"}))[0] == 400
    assert sorted(os.listdir(root)) == ["b", "sub"]


def test_propfind_depths(front, root):
    (root / "d").mkdir()
    (root / "d" / "f x.txt").write_bytes(b"12345")
    (root / "d" / "s").mkdir()
    st, h, body = run(call(front, "PROPFIND", "/d", {"Depth": "1"}))
    assert st == 207 and h["Content-Type"].startswith("application/xml")
    got = responses(body)
    assert set(got) == {"/d/", "/d/f%20x.txt", "/d/s/"}
    f = got["/d/f%20x.txt"]
    assert f["getcontentlength"] == "5" and f["displayname"] == "f x.txt" and f["resourcetype"] is None
    assert f["getcontenttype"] == "text/plain" and f["getetag"].startswith('"') and f["getlastmodified"].endswith("GMT")
    assert f["creationdate"].endswith("Z")
    assert got["/d/s/"]["resourcetype"] == "collection"
    st, _, body = run(call(front, "PROPFIND", "/d/f x.txt", {"Depth": "0"}))
    assert st == 207 and set(responses(body)) == {"/d/f%20x.txt"}
    assert run(call(front, "PROPFIND", "/d", {"Depth": "infinity"}))[0] == 403
    assert run(call(front, "PROPFIND", "/d"))[0] == 403  # no Depth is infinity (RFC 4918 sec. 9.1)
    assert run(call(front, "PROPFIND", "/none", {"Depth": "0"}))[0] == 404


def test_propfind_named_properties(front, root):
    (root / "f").write_bytes(b"abc")
    body = (b'<?xml version="1.0"?><D:propfind xmlns:D="DAV:" xmlns:X="urn:x"><D:prop>'
            b"<D:getcontentlength/><X:color/></D:prop></D:propfind>")
    st, _, out = run(call(front, "PROPFIND", "/f", {"Depth": "0"}, body))
    assert st == 207
    resp = ET.fromstring(out).find(f"{D}response")
    stats = {ps.findtext(f"{D}status"): [el.tag for el in ps.find(f"{D}prop")] for ps in resp.findall(f"{D}propstat")}
    assert stats == {"HTTP/1.1 200 OK": [f"{D}getcontentlength"], "HTTP/1.1 404 Not Found": ["{urn:x}color"]}
    allprop = b'<D:propfind xmlns:D="DAV:"><D:allprop/></D:propfind>'
    st, _, out = run(call(front, "PROPFIND", "/f", {"Depth": "0"}, allprop))
    assert st == 207 and responses(out)["/f"]["getcontentlength"] == "3"


@pytest.mark.parametrize("body", [
    b'<?xml version="1.0"?><!DOCTYPE l [<!ENTITY a "aaaaaaaaaa"><!ENTITY b "&a;&a;&a;&a;">]>'
    b'<D:propfind xmlns:D="DAV:"><D:prop>&b;</D:prop></D:propfind>',
    b'<!DOCTYPE x SYSTEM "file:///etc/passwd"><D:propfind xmlns:D="DAV:"/>',
    b"<D:propfind xmlns:D=",
    b"<other/>",
    ('<?xml version="1.0" encoding="UTF-16"?><!DOCTYPE D:propfind [<!ENTITY a "aaaa">]>'
     '<D:propfind xmlns:D="DAV:"><D:prop><D:getetag/></D:prop><x>&a;</x></D:propfind>').encode("utf-16"),
    '<D:propfind xmlns:D="DAV:"><D:prop><D:getetag/></D:prop></D:propfind>'.encode("utf-16"),
])
def test_propfind_refuses_entities_and_bad_xml(front, root, body):
    st, _, out = run(call(front, "PROPFIND", "/", {"Depth": "0"}, body))
    assert st == 400 and out.strip().endswith(b".")


def test_propfind_body_is_bounded(front):
    st, _, _ = run(call(front, "PROPFIND", "/", {"Depth": "0"}, b"<" + b"x" * (1 << 20)))
    assert st == 413


def test_write_methods_need_write_rights(root):
    (root / "f").write_bytes(b"1")
    with in_process(root, write_perm=False) as front:
        assert run(call(front, "DELETE", "/f"))[0] == 403
        assert run(call(front, "MKCOL", "/d"))[0] == 403
        assert run(call(front, "MOVE", "/f", {"Destination": "/g"}))[0] == 403
        assert run(call(front, "PROPFIND", "/", {"Depth": "1"}))[0] == 207
    assert sorted(os.listdir(root)) == ["f"]


def test_move_onto_an_ancestor_is_refused(front, root):
    (root / "a").mkdir()
    (root / "a" / "b").write_bytes(b"precious")
    (root / "a" / "other").write_bytes(b"x")
    (root / "ln").symlink_to(root / "a")
    for dest in ("/a", "/a/b", "/ln/b"):
        st, _, body = run(call(front, "MOVE", "/a/b", {"Destination": dest}))
        assert st == 403 and body.strip().endswith(b"."), dest
    assert sorted(os.listdir(root / "a")) == ["b", "other"] and (root / "a" / "b").read_bytes() == b"precious"


def test_move_puts_the_destination_back_when_the_rename_fails(front, root, monkeypatch):
    (root / "src").mkdir()
    (root / "dst").mkdir()
    (root / "dst2").write_bytes(b"kept")
    real = os.replace

    def failing(a, b):
        if os.path.basename(a) == "src":
            raise OSError(5, "Input/output error")
        return real(a, b)

    monkeypatch.setattr(os, "replace", failing)
    for dest in ("/dst", "/dst2"):
        assert run(call(front, "MOVE", "/src", {"Destination": dest}))[0] == 409
    assert sorted(os.listdir(root)) == ["dst", "dst2", "src"] and (root / "dst2").read_bytes() == b"kept"


def test_overwriting_move_is_a_delete(front, root):
    (root / "tree").mkdir()
    (root / "tree" / "f").write_bytes(b"data")
    (root / "empty").mkdir()
    (root / "x").write_bytes(b"y")
    table = front.server.handler.authorizer.user_table[USER]
    perm, table["perm"] = table["perm"], "elrf"  # may rename, may not delete
    for dest in ("/tree", "/empty"):
        st, _, body = run(call(front, "MOVE", "/x", {"Destination": dest}))
        assert st == 403 and b"delete" in body
    assert run(call(front, "MOVE", "/x", {"Destination": "/new"}))[0] == 201
    table["perm"] = perm
    assert run(call(front, "MOVE", "/new", {"Destination": "/tree"}))[0] == 409  # not empty: as DELETE
    assert (root / "tree" / "f").read_bytes() == b"data"
    assert run(call(front, "MOVE", "/new", {"Destination": "/empty"}))[0] == 204
    assert sorted(os.listdir(root)) == ["empty", "tree"] and (root / "empty").read_bytes() == b"y"


def test_move_to_another_server_is_502(front, root):
    (root / "f").write_bytes(b"1")
    port = front.port
    for dest in (f"http://elsewhere.invalid:{port}/g", f"http://127.0.0.1:{port + 1}/g", f"https://127.0.0.1:{port}/g",
                 "http://127.0.0.1/g", "ftp://127.0.0.1/g"):
        st, _, body = run(call(front, "MOVE", "/f", {"Destination": dest}))
        assert st == 502 and b"another server" in body, dest
    assert run(call(front, "MOVE", "/f", {"Destination": f"HTTP://127.0.0.1:{port}/g"}))[0] == 201
    assert sorted(os.listdir(root)) == ["g"]


def ask(tags: bytes) -> bytes:
    return b'<D:propfind xmlns:D="DAV:" xmlns:X="urn:x"><D:prop>' + tags + b"</D:prop></D:propfind>"


def test_propfind_names_are_deduplicated_and_bounded(front, root):
    (root / "f").write_bytes(b"abc")
    st, _, out = run(call(front, "PROPFIND", "/", {"Depth": "1"}, ask(b"<D:getetag/><X:n/>" * 2000)))
    assert st == 207
    resps = ET.fromstring(out).findall(f"{D}response")
    assert len(resps) == 2  # the home and f
    for resp in resps:
        assert len(resp.findall(".//{urn:x}n")) == 1 and len(resp.findall(f".//{D}getetag")) <= 1
    st, _, out = run(call(front, "PROPFIND", "/", {"Depth": "1"}, ask(b"".join(b"<X:p%d/>" % i for i in range(65)))))
    assert st == 400 and b"64" in out
    st, _, out = run(call(front, "PROPFIND", "/", {"Depth": "1"}, ask(b"<X:" + b"n" * 5000 + b"/>")))
    assert st == 400
    assert run(call(front, "PROPFIND", "/", {"Depth": "0"}, b"\xef\xbb\xbf" + ask(b"<D:getetag/>")))[0] == 207


def test_propfind_past_the_entry_cap_is_refused_whole(front, root, monkeypatch):
    from drsftp.server.http import dav
    monkeypatch.setattr(dav, "MAX_ENTRIES", 5)
    for d, count in (("five", 5), ("six", 6)):
        (root / d).mkdir()
        for i in range(count):
            (root / d / f"f{i}").write_bytes(b"x")
    st, _, out = run(call(front, "PROPFIND", "/five", {"Depth": "1"}))
    assert st == 207 and len(responses(out)) == 6
    st, _, out = run(call(front, "PROPFIND", "/six", {"Depth": "1"}))
    assert st == 507 and b"more than 5 entries" in out


def test_propfind_leaves_out_names_that_are_not_utf8(front, root, caplog):
    (root / "d").mkdir()
    (root / "d" / "good.txt").write_bytes(b"x")
    with open(os.path.join(os.fsencode(root / "d"), b"caf\xe9.txt"), "wb") as f:
        f.write(b"y")
    with caplog.at_level("INFO", logger="drsftp.server"):
        st, _, out = run(call(front, "PROPFIND", "/d/", {"Depth": "1"}))
    assert st == 207 and set(responses(out)) == {"/d/", "/d/good.txt"}
    assert [r.getMessage() for r in caplog.records if "not UTF-8" in r.getMessage()] == [
        "http: PROPFIND /d: left out 1 name(s) that are not UTF-8"]


def test_an_unexpected_value_error_is_a_500_with_one_sentence(front, monkeypatch):
    from drsftp.server.http import dav

    def broken(*_args):
        raise ValueError("a bug")

    monkeypatch.setattr(dav, "propfind", broken)
    st, _, out = run(call(front, "PROPFIND", "/", {"Depth": "0"}))
    assert st == 500 and out == b"The server failed to answer this request.\n"


def test_get_and_head_of_a_collection(front, root):
    """GET and HEAD of a collection: without its trailing slash a 301 to
    the slash form (as Apache's and nginx's WebDAV servers do), with it
    405 naming PROPFIND (a body would be stored as a file by a client, or
    a COPY pull, that asked for one)."""
    (root / "a b").mkdir()
    auth = f"Authorization: {AUTH['Authorization']}\r\nConnection: close\r\n"  # (a HEAD: no body to wait for)
    for method, path, where in (("HEAD", "/a%20b", "/a%20b/"), ("GET", "/a%20b?x=1", "/a%20b/?x=1")):
        resp = raw(front, f"{method} {path} HTTP/1.1\r\nHost: x\r\n{auth}\r\n".encode())
        assert status(resp) == 301 and f"\r\nLocation: {where}\r\n".encode() in resp, resp
    for path in ("/a%20b/", "/"):
        assert status(raw(front, f"HEAD {path} HTTP/1.1\r\nHost: x\r\n{auth}\r\n".encode())) == 405
        st, _, body = run(call(front, "GET", path))
        assert st == 405 and b"PROPFIND" in body


def test_get_of_a_collection_without_its_slash_says_it_is_a_directory(front, root, tmp_path):
    from conftest import PASSWORD, drsftp

    (root / "d").mkdir()
    (root / "d" / "f").write_bytes(b"x")
    r = drsftp("get", "-q", f"http://{USER}:{PASSWORD}@127.0.0.1:{front.port}/d", str(tmp_path / "out"), timeout=60)
    assert r.returncode != 0 and "is a directory: get it with -r" in r.stderr and "Traceback" not in r.stderr, r.stderr
    assert PASSWORD not in r.stderr and not (tmp_path / "out").exists()
