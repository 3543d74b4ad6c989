"""Where a single file's get or put lands: a URL ending in / is a directory
on the server that the file goes into under its own name (as curl -T);
a get's DEST in missing directories makes them, as -r makes its DEST,
and nothing beyond the path given."""

import os

import pytest
from conftest import drsftp, make_file, sha256_file

from drsftp.client.transfer.targets import get_dest, put_url


def test_put_into_a_directory_url_keeps_the_files_name(server, tmp_path):
    src = make_file(tmp_path / "my file.bin", 5000, seed=1)
    os.mkdir(os.path.join(server.root, "dir"))
    for url, where in ((server.url("dir/"), "dir"), (server.url(""), "")):
        r = drsftp("put", str(src), url)
        assert r.returncode == 0, r.stderr
        assert sha256_file(os.path.join(server.root, where, "my file.bin")) == sha256_file(src)
    r = drsftp("put", "-P", "2", str(src), server.url("dir/"), "--json", str(tmp_path / "p.json"))
    assert r.returncode == 0, r.stderr
    assert sorted(os.listdir(os.path.join(server.root, "dir"))) == ["my file.bin"]


def test_put_url_and_get_dest_rules(tmp_path):
    assert put_url("a/b c.bin", "ftp://h/d/") == "ftp://h/d/b%20c.bin"
    assert put_url("a/b.bin", "ftp://h/d/x.bin") == "ftp://h/d/x.bin"
    assert get_dest(None, "/d/x.bin") == "x.bin"
    assert get_dest(str(tmp_path), "/d/x.bin") == str(tmp_path / "x.bin")
    assert get_dest(f"{tmp_path}/new/", "/d/x.bin") == f"{tmp_path}/new/x.bin"
    assert get_dest(f"{tmp_path}/new/y.bin", "/d/x.bin") == f"{tmp_path}/new/y.bin"


@pytest.mark.parametrize("streams", ["1", "2"])
def test_get_makes_the_missing_directories_of_dest(server, tmp_path, streams):
    src = make_file(os.path.join(server.root, "f.bin"), 70000, seed=2)
    dest = tmp_path / "a" / "b" / "g.bin"
    r = drsftp("get", "-P", streams, server.url("f.bin"), str(dest))
    assert r.returncode == 0, r.stderr
    assert sha256_file(dest) == sha256_file(src)
    r = drsftp("get", "-P", streams, server.url("f.bin"), str(tmp_path / "c") + "/")
    assert r.returncode == 0, r.stderr
    assert os.listdir(tmp_path / "c") == ["f.bin"]
    assert sorted(os.listdir(tmp_path)) == ["a", "c", "srv"]  # nothing beyond what was named


def test_a_refused_get_makes_no_directory_and_a_file_in_the_way_is_one_sentence(server, tmp_path):
    make_file(os.path.join(server.root, "f.bin"), 1000, seed=3)
    r = drsftp("get", server.url("missing.bin"), str(tmp_path / "x" / "y.bin"))
    assert r.returncode == 1 and "550" in r.stderr
    assert not (tmp_path / "x").exists()
    (tmp_path / "plain").write_bytes(b"")
    for streams in ("1", "2"):
        r = drsftp("get", "-P", streams, server.url("f.bin"), str(tmp_path / "plain" / "y.bin"))
        assert r.returncode == 1
        assert r.stderr == f"drsftp: error: cannot write {tmp_path}/plain/y.bin: not a directory\n"
