"""Mistyped and unusable command lines: one plain sentence on stderr, a
non-zero exit, no traceback, no password shown, nothing written or lost
(README, "Errors")."""

from __future__ import annotations

from pathlib import Path

from conftest import drsftp

SECRET = "pw12345678"


def _refused(r, rc=2):
    err = r.stderr.strip()
    assert r.returncode == rc, r.stderr
    assert err.count("\n") == 0 and "Traceback" not in err and SECRET not in err, r.stderr
    return err


def test_a_url_with_one_slash_is_refused_in_copy_and_put_without_its_password(tmp_path):
    good = f"ftp://u:{SECRET}@127.0.0.1:1/small.txt"
    typo = f"ftp:/u:{SECRET}@127.0.0.1:1/z.txt"
    (tmp_path / "small.txt").write_text("x")
    for argv in (("copy", good, typo), ("copy", typo, good), ("copy", typo, "local.txt"),
                 ("put", typo, good), ("put", "small.txt", typo), ("get", typo, "d.txt"),
                 ("copy", f"http:/u:{SECRET}@127.0.0.1:1/a", "local.txt")):
        err = _refused(drsftp(*argv, cwd=tmp_path))
        assert "URL has no host" in err and ":***@" in err, (argv, err)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["small.txt"]  # no ftp:/... directory made


def test_put_refuses_a_url_as_its_source(tmp_path):
    err = _refused(drsftp("put", f"ftp://alice:{SECRET}@127.0.0.1:1/a.txt", f"ftp://alice:{SECRET}@127.0.0.1:1/b",
                          cwd=tmp_path))
    assert "is a URL" in err and "copy" in err
    assert list(tmp_path.iterdir()) == []


def test_an_ftp_url_with_a_query_or_fragment_is_refused(server, tmp_path):
    (Path(server.root) / "we").write_text("not this one")
    for tail in ("we#ird.txt", "small.txt?x=1", "we?"):
        err = _refused(drsftp("get", server.url(tail), str(tmp_path / "out")))
        assert "query or fragment" in err and "%23" in err
    assert not (tmp_path / "out").exists()
    (Path(server.root) / "we#ird.txt").write_text("wanted")
    r = drsftp("get", server.url("we%23ird.txt"), str(tmp_path / "out"))
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "out").read_text() == "wanted"
