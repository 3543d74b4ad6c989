"""drsftp/http/url.py and drsftp/http/statuses.py: what the HTTP client
parses from the command line and says of a status, sans-IO."""

import pytest

from drsftp.ftp.url import URLError
from drsftp.http.statuses import status_sentence
from drsftp.http.url import is_http_url, parse_http_url


def test_parts_and_defaults():
    loc = parse_http_url("https://alice:p%40ss@example.org/a%20b/c.bin")
    assert (loc.scheme, loc.host, loc.port, loc.user, loc.password, loc.path) == (
        "https", "example.org", 443, "alice", "p@ss", "/a b/c.bin")
    assert loc.url() == "https://example.org:443/a%20b/c.bin" and loc.shown == loc.url()
    assert parse_http_url("http://[::1]:8080").url("/x") == "http://[::1]:8080/x"
    assert parse_http_url("HTTP://h/").path == "/" and parse_http_url("http://h/").port == 80
    assert is_http_url("https://h/x") and is_http_url("HTTP://h") and not is_http_url("ftp://h/x")


def test_credentials_from_the_lookup_only_without_a_password():
    asked = []

    def lookup(host):
        asked.append(host)
        return ("bob", None, "from-netrc")

    assert parse_http_url("https://h/f", lookup).password == "from-netrc"
    assert parse_http_url("https://bob@h/f", lookup).user == "bob"
    assert parse_http_url("https://carol@h/f", lookup).password is None  # another login's entry
    assert parse_http_url("https://u:given@h/f", lookup).password == "given"
    assert asked == ["h", "h", "h"]


@pytest.mark.parametrize("url", [
    "ftp://h/f", "https:///f", "https://h:0/f", "https://h:99999/f", "https://h/f?q=1", "https://h/f#x",
    "https://h/a%0d%0aX: y", "https://u:p%0a@h/f", "https://[::1/f",
])
def test_bad_urls_are_refused_without_the_password(url):
    with pytest.raises(URLError) as err:
        scheme, rest = url.split("://", 1)
        parse_http_url(url if "@" in url else f"{scheme}://user:hunter2@{rest}")
    assert "hunter2" not in str(err.value)


def test_status_sentences():
    assert status_sentence(404) == "no such file or directory (HTTP 404)"
    assert status_sentence(416).endswith("(did the file change?) (HTTP 416)")
    assert status_sentence(418, "I'm a teapot\r\n") == "the server refused the request: I'm a teapot (HTTP 418)"
    assert status_sentence(599, None) == "the server failed (HTTP 599)"
