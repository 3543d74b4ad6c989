"""drsftp's HTTP client against the real `drsftp serve --http-port` (its
front: drsftp/server/http/), over HTTPS with the test CA: bytes compared
by SHA-256 in every transfer (docs/HTTP.md, "Client")."""

from __future__ import annotations

import base64
import http.client
import json
import os
import ssl

import pytest
from conftest import PASSWORD, USER, make_file, sha256_file
from httpserve import serve_process
from tlscerts import make_certs

from drsftp.cli import main
from drsftp.client.streams.rangeplan import ResumeRecord, save_record
from drsftp.ftp.eblock import RangeSet

SIZE = 6_000_000


@pytest.fixture(scope="module")
def front(tmp_path_factory):
    base = tmp_path_factory.mktemp("e2e")
    certs = make_certs(base / "certs")
    root = base / "root"
    root.mkdir()
    make_file(root / "big.bin", SIZE, seed=42)
    (root / "dir" / "sub").mkdir(parents=True)
    make_file(root / "dir" / "a.bin", 200_000, seed=1)
    make_file(root / "dir" / "sub" / "b.bin", 3, seed=2)
    os.symlink("/etc/hostname", root / "outside")  # a link out of the home: 403
    with serve_process(root, certs=certs) as f:
        f.root, f.certs = root, certs
        yield f


def url(front, path: str, password: str = PASSWORD) -> str:
    return f"https://{USER}:{password}@127.0.0.1:{front.port}{path}"


def run(front, *argv: str) -> int:
    extra = ["--ca-file", str(front.certs.ca)] + (["-q"] if argv[0] != "ls" else [])
    try:
        return main([argv[0], *extra, *argv[1:]])
    except SystemExit as exc:
        return int(exc.code or 0)


@pytest.mark.parametrize("streams", ["1", "4"])
def test_get_and_put_are_byte_exact_with_drs_answered(front, tmp_path, streams):
    out, report = tmp_path / "o.bin", tmp_path / "r.json"
    assert run(front, "get", url(front, "/big.bin"), str(out), "-P", streams, "--verify", "--json", str(report)) == 0
    assert sha256_file(out) == sha256_file(front.root / "big.bin")
    r = json.loads(report.read_text())
    assert r["drs_peer"] is True and r["sha256"] == sha256_file(out) and r["bytes"] == SIZE
    assert r["requests"] >= int(streams) and r["connections"] >= int(streams)  # ranged GETs, a connection each
    assert run(front, "put", str(out), url(front, f"/up{streams}.bin"), "-P", streams, "--verify",
               "--json", str(report)) == 0
    assert sha256_file(front.root / f"up{streams}.bin") == sha256_file(out)
    assert json.loads(report.read_text())["drs_peer"] is True


def test_get_continue_keeps_what_the_part_holds(front, tmp_path):
    src = front.root / "big.bin"
    data = src.read_bytes()
    out, report = tmp_path / "o.bin", tmp_path / "r.json"
    part = f"{out}.part"
    with open(part, "wb") as f:  # two ranges held, a hole between them and after
        f.write(data[:1_000_000] + bytes(2_000_000) + data[3_000_000:4_000_000])
    save_record(part, ResumeRecord(SIZE, None, RangeSet([(0, 1_000_000), (3_000_000, 4_000_000)])))
    assert run(front, "get", url(front, "/big.bin"), str(out), "-P", "4", "--continue", "--json", str(report)) == 0
    assert sha256_file(out) == sha256_file(src) and not os.path.exists(part)
    r = json.loads(report.read_text())
    assert (r["resumed_from"], r["bytes"]) == (2_000_000, SIZE - 2_000_000)


def test_put_continue_sends_only_what_the_server_lacks(front, tmp_path):
    src = front.root / "big.bin"
    conn = http.client.HTTPSConnection("127.0.0.1", front.port, context=ssl.create_default_context(
        cafile=str(front.certs.ca)), timeout=30)
    auth = "Basic " + base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()
    conn.request("PUT", "/resumed.bin", body=src.read_bytes()[:1_500_000], headers={
        "Authorization": auth, "Content-Range": f"bytes 0-1499999/{SIZE}"})
    assert conn.getresponse().status == 202
    conn.close()
    report = tmp_path / "r.json"
    assert run(front, "put", str(src), url(front, "/resumed.bin"), "--continue", "--json", str(report)) == 0
    assert sha256_file(front.root / "resumed.bin") == sha256_file(src)
    r = json.loads(report.read_text())
    assert (r["resumed_from"], r["bytes"]) == (1_500_000, SIZE - 1_500_000)


@pytest.mark.parametrize(("path", "password", "words", "status"), [
    ("/nope.bin", PASSWORD, "no such file", 404),
    ("/big.bin", "wrong-password", "login refused", 401),
    ("/outside", PASSWORD, "permission denied", 403),
])
def test_refusals_are_one_sentence(front, tmp_path, capsys, path, password, words, status):
    assert run(front, "get", url(front, path, password), str(tmp_path / "o")) == 1
    err = capsys.readouterr().err
    assert words in err and f"(HTTP {status})" in err and err.count("\n") == 1 and "wrong-password" not in err


def test_a_range_past_the_end_is_416_to_the_client_rules(front):
    # (the client asks only within the HEAD's size: the sentence it gives a 416 is the fake server's test;
    # here the real front's 416 carries what the client's parser reads)
    from drsftp.http.spans import unsatisfied_size

    conn = http.client.HTTPSConnection("127.0.0.1", front.port, context=ssl.create_default_context(
        cafile=str(front.certs.ca)), timeout=30)
    auth = "Basic " + base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()
    conn.request("GET", "/big.bin", headers={"Authorization": auth, "Range": f"bytes={SIZE}-"})
    resp = conn.getresponse()
    assert resp.status == 416 and unsatisfied_size(resp.getheader("Content-Range")) == SIZE
    conn.close()


def test_ls_and_trees(front, tmp_path, capsys):
    assert run(front, "ls", url(front, "/dir/")) == 0
    assert capsys.readouterr().out.splitlines() == ["a.bin", "sub/"]
    dest = tmp_path / "dest"
    assert run(front, "get", "-r", "-c", "2", url(front, "/dir/"), str(dest)) == 0
    assert sha256_file(dest / "a.bin") == sha256_file(front.root / "dir" / "a.bin")
    assert sha256_file(dest / "sub" / "b.bin") == sha256_file(front.root / "dir" / "sub" / "b.bin")
    report = tmp_path / "r.json"
    assert run(front, "put", "-r", "--sync", f"{dest}/", url(front, "/copy/"), "--json", str(report)) == 0
    assert sha256_file(front.root / "copy" / "sub" / "b.bin") == sha256_file(dest / "sub" / "b.bin")
    assert run(front, "put", "-r", "--sync", f"{dest}/", url(front, "/copy/"), "--json", str(report)) == 0
    assert (json.loads(report.read_text())["files"], json.loads(report.read_text())["skipped"]) == (0, 2)
