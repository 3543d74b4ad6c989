"""`put -P N --continue` resumes on the N streams asked for: from the
ranges its record names, or without a record (an interrupted stream-mode
put) from the prefix the server holds; an interrupted MODE E put always
leaves a record, so its part file (written at offsets, with holes) is never
taken as a prefix (docs/PARALLEL.md, "Resume")."""

import json
import os

from conftest import drsftp, make_file, running_server, sha256_file

from drsftp.client.transfer import putresume
from drsftp.ftp.url import parse_url

MiB = 1 << 20


def test_continue_without_a_record_resumes_the_servers_prefix_on_n_streams(tmp_path):
    root = tmp_path / "srv"
    root.mkdir()
    src = make_file(tmp_path / "up.bin", 24 * MiB + 11, seed=5)
    prefix = 7 * MiB + 3
    with open(src, "rb") as f:
        (root / ".up.bin.part").write_bytes(f.read(prefix))  # what an interrupted stream-mode put left
    env = {**os.environ, "XDG_STATE_HOME": str(tmp_path / "state")}
    with running_server(root) as srv:
        r = drsftp("put", "-P", "4", "--continue", str(src), srv.url("up.bin"), "--json", str(tmp_path / "p.json"),
                   env=env)
        assert r.returncode == 0, r.stderr
    p = json.loads((tmp_path / "p.json").read_text())
    assert p["mode"] == "E" and p["parallel"] == 4 and p["streams"] > 1
    assert p["resumed_from"] == prefix and p["bytes"] == os.path.getsize(src) - prefix
    assert sha256_file(root / "up.bin") == sha256_file(src)
    assert not (root / ".up.bin.part").exists()


def test_an_interrupted_parallel_put_leaves_a_record_and_continues_whole(tmp_path):
    """Stopped before the server's first range marker (every 2 s): the
    record holds what the server reported (nothing), so --continue starts
    the part file over rather than appending to a file of holes."""
    root = tmp_path / "srv"
    root.mkdir()
    src = make_file(tmp_path / "u.bin", 200 * MiB, seed=6)
    state = tmp_path / "state"
    env = {**os.environ, "XDG_STATE_HOME": str(state)}
    with running_server(root, "--tuning", "fixed:8k") as srv:
        url = srv.url("u.bin")
        r = drsftp("put", "-P", "4", "--tuning", "fixed:8k", "--max-time", "0.3", str(src), url, env=env)
        assert r.returncode == 28, r.stderr
        assert not (root / "u.bin").exists()
        os.environ["XDG_STATE_HOME"] = str(state)
        try:
            record = putresume.record_base(str(src), parse_url(url)) + ".ranges"
        finally:
            del os.environ["XDG_STATE_HOME"]
        assert os.path.exists(record)
        r = drsftp("put", "-P", "4", "--continue", str(src), url, "--json", str(tmp_path / "p.json"), env=env)
        assert r.returncode == 0, r.stderr
    assert json.loads((tmp_path / "p.json").read_text())["mode"] == "E"
    assert sha256_file(root / "u.bin") == sha256_file(src)
    assert not os.path.exists(record)
