"""Macaroons of `drsftp serve`'s HTTPS side (docs/HTTP.md#third-party-copy,
docs/SECURITY.md): the POST that mints one, and ``Authorization: Bearer``
checked for its signature, expiry, path and activity on every method;
with the sans-IO rules they rest on (http/caveats.py, http/copyreq.py,
http/perfmarker.py)."""

from __future__ import annotations

import asyncio
import json

import aiohttp
import pytest
from conftest import make_file
from httpserve import AUTH, in_process
from pymacaroons import Macaroon

from drsftp.http import caveats, copyreq, perfmarker

REQ = {"Content-Type": caveats.CONTENT_TYPE}


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, 60))


async def call(front, method, path, headers=None, data=None):
    async with aiohttp.ClientSession() as s, s.request(method, front.url(path), headers=headers or {},
                                                       data=data) as r:
        return r.status, (await r.read()).decode("utf-8", "replace")


def mint(front, path, caveat_list, validity="PT30M", auth=None):
    body = json.dumps({"caveats": caveat_list, "validity": validity})
    status, text = run(call(front, "POST", path, {**(auth or AUTH), **REQ}, body))
    assert status == 200, text
    doc = json.loads(text)
    assert doc["uri"]["target"].endswith(path)
    return doc["macaroon"]


def bearer(token):
    return {"Authorization": f"Bearer {token}"}


@pytest.fixture
def front(tmp_path):
    root = tmp_path / "srv"
    (root / "sub" / "deeper").mkdir(parents=True)
    (root / "subway").mkdir()
    for name in ("sub/a.bin", "sub/deeper/b.bin", "subway/c.bin", "top.bin"):
        make_file(root / name, 1000, seed=1)
    with in_process(root) as f:
        yield f


def test_token_reads_within_its_path(front):
    token = mint(front, "/sub", ["activity:DOWNLOAD,LIST"])
    assert run(call(front, "GET", "/sub/a.bin", bearer(token)))[0] == 200
    assert run(call(front, "GET", "/sub/deeper/b.bin", bearer(token)))[0] == 200
    assert run(call(front, "PROPFIND", "/sub", {**bearer(token), "Depth": "1"}))[0] == 207
    for outside in ("/top.bin", "/subway/c.bin"):  # /subway is not below /sub
        status, text = run(call(front, "GET", outside, bearer(token)))
        assert status == 403 and "holds for /sub and below" in text, text


def test_token_allows_its_activities_only(front):
    token = mint(front, "/sub", ["activity:DOWNLOAD"])
    status, text = run(call(front, "PUT", "/sub/new.bin", bearer(token), b"x"))
    assert status == 403 and "UPLOAD" in text, text
    status, text = run(call(front, "DELETE", "/sub/a.bin", bearer(token)))
    assert status == 403 and "DELETE" in text
    up = mint(front, "/sub/new.bin", ["activity:UPLOAD"])
    assert run(call(front, "PUT", "/sub/new.bin", bearer(up), b"hello"))[0] == 201
    assert run(call(front, "GET", "/sub/new.bin", bearer(up)))[0] == 403


def test_expired_and_tampered_tokens_are_401(front):
    expired = mint(front, "/sub", ["activity:DOWNLOAD", "before:2000-01-01T00:00:00Z"])
    status, text = run(call(front, "GET", "/sub/a.bin", bearer(expired)))
    assert status == 401 and "expired" in text
    token = mint(front, "/sub", ["activity:DOWNLOAD"])
    mac = Macaroon.deserialize(token)
    forged = Macaroon(location=mac.location, identifier=mac.identifier, key=b"not the server's secret at all!!")
    for c in mac.first_party_caveats():
        forged.add_first_party_caveat(c.caveat_id.replace("path:/sub", "path:/"))
    status, text = run(call(front, "GET", "/top.bin", bearer(forged.serialize())))
    assert status == 401 and "signature" in text, text
    status, _ = run(call(front, "GET", "/sub/a.bin", bearer(token[:-6] + "AAAAAA")))
    assert status == 401
    status, _ = run(call(front, "GET", "/sub/a.bin", bearer("not-a-macaroon")))
    assert status == 401


def test_holder_attenuates_and_bearer_mints_no_wider(front):
    token = mint(front, "/sub", ["activity:DOWNLOAD,LIST"])
    mac = Macaroon.deserialize(token)
    mac.add_first_party_caveat("path:/sub/deeper")  # the macaroon's point: anyone may narrow it
    narrow = mac.serialize()
    assert run(call(front, "GET", "/sub/deeper/b.bin", bearer(narrow)))[0] == 200
    assert run(call(front, "GET", "/sub/a.bin", bearer(narrow)))[0] == 403
    # a token asked for with a token: only within it, and keeping its caveats
    assert run(call(front, "POST", "/sub", {**bearer(narrow), **REQ}, "{}"))[0] == 403
    second = mint(front, "/sub/deeper", ["activity:UPLOAD"], auth=bearer(narrow))
    assert run(call(front, "PUT", "/sub/deeper/up.bin", bearer(second), b"x"))[0] == 403


def test_macaroon_request_refusals(front):
    assert run(call(front, "POST", "/sub", {**AUTH, **REQ}, '{"caveats": ["activity:FLY"]}'))[0] == 400
    assert run(call(front, "POST", "/sub", {**AUTH, **REQ}, "not json"))[0] == 400
    assert run(call(front, "POST", "/sub", {**AUTH, **REQ}, '{"validity": "30 minutes"}'))[0] == 400
    assert run(call(front, "POST", "/sub", {**AUTH, **REQ}, '{"caveats": ["path:/top"]}'))[0] == 400
    assert run(call(front, "POST", "/sub", {**AUTH, "Content-Type": "text/plain"}, "{}"))[0] == 415
    assert run(call(front, "POST", "/sub", REQ, "{}"))[0] == 401


def test_validity_is_capped():
    req = caveats.parse_request(b'{"caveats": ["activity:DOWNLOAD"], "validity": "P30D"}')
    assert req.validity == caveats.MAX_VALIDITY
    assert caveats.parse_duration("PT1H30M") == 5400
    assert caveats.parse_duration("P1DT2S") == 86402
    for bad in ("P", "PT", "30M", "PT-1M"):
        with pytest.raises(caveats.CaveatError):
            caveats.parse_duration(bad)


def test_caveat_reading():
    g = caveats.read_caveats(["name:u", "activity:DOWNLOAD,LIST", "activity:LIST,UPLOAD", "path:/a"])
    assert g.activities == frozenset({"LIST"}) and g.user == "u"
    assert g.refusal("PROPFIND", "/a/b") is None
    assert g.refusal("GET", "/a/b") and g.refusal("PROPFIND", "/ab")
    with pytest.raises(caveats.CaveatError):
        caveats.read_caveats(["ip:10.0.0.0/8"])  # not understood: never ignored


def test_copy_headers():
    got = copyreq.transfer_headers([("TransferHeaderAuthorization", "Bearer x"), ("Source", "s"),
                                    ("TransferHeaderX-Foo", "1")])
    assert got == [("Authorization", "Bearer x"), ("X-Foo", "1")]
    for bad in ("TransferHeaderHost", "TransferHeaderContent-Length", "TransferHeader"):
        with pytest.raises(copyreq.CopyHeaderError):
            copyreq.transfer_headers([(bad, "v")])
    assert copyreq.streams("0", 64) == 1 and copyreq.streams("500", 64) == 64
    assert copyreq.ranges(150, chunk=64) == [(0, 64), (64, 128), (128, 150)]
    with pytest.raises(copyreq.CopyHeaderError):
        copyreq.credential("gridsite")
    assert copyreq.overwrite("F") is False and copyreq.overwrite(None) is True


def test_perf_marker_round_trip():
    text = perfmarker.format_marker(perfmarker.Marker(1537788010, 0, 238745, 1, ("tcp:192.0.2.2:8443",)))
    assert text == ("Perf Marker\n    Timestamp: 1537788010\n    Stripe Index: 0\n    Stripe Bytes Transferred:"
                    " 238745\n    Total Stripe Count: 1\n    RemoteConnections: tcp:192.0.2.2:8443\nEnd\n")
    out = perfmarker.parse_stream(text + perfmarker.SUCCESS + "\n")
    assert out.ok and out.transferred == 238745
    assert perfmarker.failure("a\nb") == "failure: a b\n"
    with pytest.raises(ValueError):
        perfmarker.parse_stream("\n")  # davix takes a blank line for an error: the stream has none


def test_a_move_over_a_file_needs_the_delete_activity(front):
    token = mint(front, "/sub", ["activity:UPDATE_METADATA"])
    over = {**bearer(token), "Destination": front.url("/sub/deeper/b.bin")}
    status, text = run(call(front, "MOVE", "/sub/a.bin", over))
    assert status == 403 and "DELETE" in text, text  # (it would replace b.bin)
    fresh = {**bearer(token), "Destination": front.url("/sub/renamed.bin")}
    assert run(call(front, "MOVE", "/sub/a.bin", fresh))[0] == 201
