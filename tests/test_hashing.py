"""drsftp/server/ftp/hashing.py: the one digest loop over a file, CKSM's
argument and the FEAT lines (the commands on a live server:
test_reliability.py for HASH, test_eblock_server.py for CKSM)."""

import hashlib
import os
import zlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from drsftp.http.digest import BY_CKSM, BY_FTP_HASH
from drsftp.server.ftp.hashing import CHUNK, CKSM_FEAT, digest_file, parse_cksm

DATA = bytes(range(256)) * (CHUNK // 256 * 2 + 3)  # two chunks and a bit


@pytest.fixture(scope="module")
def data_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("h") / "d.bin"
    path.write_bytes(DATA)
    return str(path)


def _reference(name, data):
    if name == "ADLER32":
        return f"{zlib.adler32(data):08x}"
    return hashlib.new(name.lower(), data).hexdigest()


@pytest.mark.parametrize("name", list(BY_CKSM))
def test_a_whole_file_digest_is_the_library_value_and_its_end_the_size(data_file, name):
    assert digest_file(data_file, BY_CKSM[name]) == (len(DATA), _reference(name, DATA))


@settings(max_examples=40, deadline=None)
@given(offset=st.integers(0, len(DATA) + 10), length=st.none() | st.integers(0, 3 * CHUNK))
def test_a_range_digest_covers_just_that_range(data_file, offset, length):
    want = DATA[offset:] if length is None else DATA[offset:offset + length]
    assert digest_file(data_file, BY_CKSM["MD5"], offset, length)[1] == hashlib.md5(want).hexdigest()


def test_cksm_arguments():
    alg, offset, length, path = parse_cksm("sha-256 100 -1 /a b.bin")
    assert (alg, offset, length, path) == (BY_CKSM["SHA256"], 100, None, "/a b.bin")
    assert parse_cksm("ADLER32 0 7 x")[2] == 7
    for bad in ("MD5 0 -1", "CRC7 0 -1 x", "MD5 -1 -1 x", "MD5 0 -2 x", "MD5 a -1 x", "MD5 0 -1 "):
        with pytest.raises(ValueError):
            parse_cksm(bad)


def test_the_feat_names_come_from_the_one_table():
    assert CKSM_FEAT == "CKSM MD5;ADLER32;SHA1;SHA256;SHA512;"  # globus-url-copy reads this line
    assert set(BY_FTP_HASH) == {"SHA-256", "SHA-512", "SHA-1", "MD5"}  # HASH names cryptographic hashes only


def test_a_whole_file_digest_is_computed_once_for_both_fronts(tmp_path, monkeypatch):
    """FTP's HASH/CKSM and HTTP's Want-Digest share one cache by file
    version (server/ops/digests.py): what one front computed the other
    answers without reading the file again; a changed file is read afresh."""
    import asyncio
    import base64

    from drsftp.io import fileio
    from drsftp.server.http.files import DigestCache

    path = tmp_path / "a.bin"
    path.write_bytes(DATA)
    old = path.stat().st_mtime_ns - 10**10  # settled: written 10 s ago (a fresh file is not kept)
    os.utime(path, ns=(old, old))
    size, hexd = digest_file(str(path), BY_CKSM["SHA256"])

    def no_reads(*_args, **_kw):
        raise AssertionError("the file was read again")

    monkeypatch.setattr(fileio, "feed", no_reads)
    monkeypatch.setattr(fileio, "digest_file", no_reads)
    assert digest_file(str(path), BY_CKSM["SHA256"]) == (size, hexd)
    fd = os.open(path, os.O_RDONLY)
    try:
        got = asyncio.run(DigestCache().value(fd, str(path), os.fstat(fd), "sha-256"))
    finally:
        os.close(fd)
    assert got == base64.b64encode(hashlib.sha256(DATA).digest()).decode()
    os.utime(path, ns=(old, old + 1000))  # a new version
    with pytest.raises(AssertionError, match="read again"):
        digest_file(str(path), BY_CKSM["SHA256"])


def test_a_file_modified_just_now_is_not_kept(tmp_path):
    """A same-size rewrite within one timestamp tick keeps its version key:
    a digest of a file modified in the last seconds is never cached."""
    path = tmp_path / "b.bin"
    path.write_bytes(b"x" * 4096)
    first = digest_file(str(path), BY_CKSM["MD5"])
    st = path.stat()
    path.write_bytes(b"y" * 4096)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))  # the same key as before
    assert digest_file(str(path), BY_CKSM["MD5"]) != first
