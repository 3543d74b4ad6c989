"""drsftp/ftp/safepath.py: names a client or server may write, and the path below
a root they make (RFC 959's pathnames; docs/SECURITY.md).  Expected values
come from the RFCs and the docs, written here, not read back from the module's
constants (docs/MUTATION.md: many of these tests pin a rule a mutation run
found open)."""

import pytest

from drsftp.ftp import safepath
from drsftp.ftp.safepath import UnsafePath, check_name, local_path

# -- safepath (docs/SECURITY.md: a listed name is one component of at most 255 bytes) --


def test_a_name_of_255_utf8_bytes_passes_and_256_is_refused():
    assert check_name("a" * 255) == "a" * 255
    assert check_name("é" * 127 + "a") == "é" * 127 + "a"  # 255 bytes in 128 characters
    for name in ("a" * 256, "é" * 128):  # 256 bytes
        with pytest.raises(UnsafePath, match="255 bytes"):
            check_name(name)


@pytest.mark.parametrize("root, want", [(".", "./a/b"), ("./", "./a/b"), ("", "a/b")])
def test_a_destination_given_as_the_current_directory_takes_clean_names(root, want):
    """DEST "." (``drsftp get -r URL/ .``): "./a/b" normalises to "a/b",
    which is below "." all the same."""
    assert local_path(root, ("a", "b")) == want


@pytest.mark.parametrize("root, parts", [
    ("/r", ("..",)), ("/r", ("..", "x")), ("/r", (".",)), ("/r", ("/etc",)), ("/r", ("x", "../../y")),
    ("/", ("..",)), ("/", (".",)),
    (".", ("..",)), (".", ("..", "x")), (".", (".",)), (".", ("/etc",)), (".", ("x", "../../y")),
    ("r", ("..",)), ("r", ("..", "x")),
])
def test_local_path_asserts_its_result_is_below_the_root_even_if_a_name_check_failed(monkeypatch, root, parts):
    """local_path does not assume check_name refused every climbing part: it
    checks the joined path itself (docs/SECURITY.md, defence in depth)."""
    monkeypatch.setattr(safepath, "check_rel", lambda parts: parts)
    with pytest.raises(UnsafePath, match="leaves"):
        local_path(root, parts)


@pytest.mark.parametrize("root", ["/", "/r", "/r/", "r", ".", "r/.."])
def test_local_path_with_the_name_check_off_still_takes_clean_and_odd_names(monkeypatch, root):
    monkeypatch.setattr(safepath, "check_rel", lambda parts: parts)
    for parts in (("a",), ("..x", "b.."), ("...",)):
        assert local_path(root, parts).endswith("/".join(parts))
