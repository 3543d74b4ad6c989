"""drsftp/client/session/credentials.py: a URL's login, from the URL or ~/.netrc.
Expected values come from the RFCs and the docs, written here, not read back
from the module's constants (docs/MUTATION.md: many of these tests pin a rule
a mutation run found open)."""

import pytest

from drsftp.client.session.credentials import locate
from drsftp.ftp.url import FTPLocation, URLError


def test_ftps_urls_default_to_the_implicit_ftps_port_990(tmp_path):
    """RFC 4217 sec. 7 and IANA: implicit FTPS listens on 990, FTP on 21."""
    rc = tmp_path / "netrc"
    rc.write_text("")
    assert locate("ftps://h/f", str(rc)).port == 990
    assert locate("ftp://h/f", str(rc)).port == 21


def test_an_unreadable_or_malformed_netrc_is_a_plain_error(tmp_path):
    bad = tmp_path / "netrc"
    bad.write_text("machine\n")
    with pytest.raises(URLError, match=r"cannot read .*missing 'machine' name"):
        locate("ftp://h/f", str(bad))
    with pytest.raises(URLError, match=r"cannot read .*: is a directory"):
        locate("ftp://h/f", str(tmp_path))


# -- URLs and ~/.netrc -----------------------------------------------------------

def test_netrc_password_only_for_its_own_login(tmp_path):
    rc = tmp_path / "netrc"
    rc.write_text("machine h login alice password pw\n")
    rc.chmod(0o600)
    assert locate("ftp://h/f", str(rc)) == FTPLocation("h", 21, "alice", "pw", "/f")
    assert locate("ftp://alice@h/f", str(rc)).password == "pw"
    assert locate("ftp://bob@h/f", str(rc)).password == ""  # never alice's password for bob


def test_anonymous_gets_a_placeholder_password(tmp_path):
    empty = tmp_path / "netrc"
    empty.write_text("")  # (not the user's own ~/.netrc)
    loc = locate("ftp://h:2121/d/f", str(empty))
    assert (loc.user, loc.password, loc.port) == ("anonymous", "drsftp@", 2121)
