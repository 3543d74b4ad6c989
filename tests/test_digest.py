"""drsftp/http/digest.py: Want-Digest and Digest (RFC 3230, RFC 5843)."""

import base64
import hashlib
import zlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from drsftp.http import digest
from drsftp.http.digest import TABLE, Digester, digest_header, parse_digest, want_digest


@pytest.mark.parametrize("header,want", [
    ("adler32", "adler32"),
    ("SHA-256", "sha-256"),
    ("md5;q=0.3, sha-256;q=0.9, adler32;q=0.5", "sha-256"),
    ("adler32, md5", "adler32"),  # a tie: the first listed
    ("crc32c, adler32;q=0.1", "adler32"),  # unknown ones skipped
    ("sha-256;q=0, md5;q=0.2", "md5"),  # q=0: not acceptable
    ("unixsum", None),
    ("sha-256;q=bogus", None),
    ("", None),
    (None, None),
])
def test_the_wanted_digest_is_the_best_offered(header, want):
    assert want_digest(header) == want


@given(st.lists(st.binary(max_size=5000), max_size=6))
def test_digests_match_the_library_values_over_any_chunking(chunks):
    data = b"".join(chunks)
    got = {}
    for algorithm in ("adler32", "md5", "sha-256"):
        d = Digester(algorithm)
        for c in chunks:
            d.update(c)
        got[algorithm] = d.value()
    assert got["adler32"] == f"{zlib.adler32(data):08x}"
    assert got["md5"] == base64.b64encode(hashlib.md5(data).digest()).decode()
    assert got["sha-256"] == base64.b64encode(hashlib.sha256(data).digest()).decode()


def test_a_digest_header_round_trips_and_an_unknown_algorithm_is_refused():
    header = ", ".join([digest_header("adler32", "0A1B2C3D"), digest_header("sha-256", "abc+/=")])
    assert parse_digest(header) == {"adler32": "0a1b2c3d", "sha-256": "abc+/="}
    with pytest.raises(ValueError, match="unknown digest algorithm 'crc32'"):
        Digester("crc32")


@given(st.lists(st.binary(max_size=5000), max_size=6))
def test_each_algorithm_of_the_table_is_the_library_one_under_each_name(chunks):
    data = b"".join(chunks)
    for algorithm in TABLE:
        d = algorithm.new()
        for c in chunks:
            d.update(c)
        if algorithm.cksm == "ADLER32":
            assert d.digest() == zlib.adler32(data).to_bytes(4, "big")  # network byte order
        else:
            assert d.digest() == hashlib.new(algorithm.cksm.lower(), data).digest()
        assert d.hexdigest() == d.digest().hex()
        for name in (algorithm.ftp_hash, algorithm.http):  # the other fronts spell it alike
            assert name is None or name.replace("-", "").upper() == algorithm.cksm


def test_sha256_as_gfal2_spells_it_is_answered_under_that_spelling():
    # gfal2 and davix send `Want-Digest: SHA256` and read back only `SHA256=`
    assert digest.wanted("SHA256") == ("sha-256", "SHA256")
    assert digest.wanted("sha-256") == ("sha-256", "sha-256")
    assert digest.wanted("md5;q=0.3, SHA256;q=0.9") == ("sha-256", "SHA256")
    assert digest.want_digest("SHA256") == "sha-256"
    assert digest.wanted("sha-512") is None
