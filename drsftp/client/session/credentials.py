"""Where a URL without a password finds one: ~/.netrc or ``--netrc FILE``."""

from __future__ import annotations

import netrc
import os

from ...ftp.url import Credentials, FTPLocation, URLError, parse_url


def locate(url: str, netrc_file: str | None = None) -> FTPLocation:
    """``url`` parsed, its password from ``netrc_file`` (default ~/.netrc,
    if it exists) when the URL has none."""
    return parse_url(url, netrc_lookup(netrc_file))


def netrc_lookup(netrc_file: str | None = None) -> Credentials:
    """host -> (login, account, password) from ``netrc_file`` (default
    ~/.netrc, if it exists); for ftp:// and https:// URLs alike.  A named
    file that does not exist is an error: a typo must not log in as
    anonymous."""
    if netrc_file and not os.path.exists(netrc_file):
        raise URLError(f"cannot read --netrc {netrc_file}: no such file")
    path = netrc_file or os.path.join(os.path.expanduser("~"), ".netrc")

    def lookup(host: str) -> tuple[str, str | None, str | None] | None:
        if not os.path.exists(path):
            return None
        try:
            return netrc.netrc(path).authenticators(host)
        except (netrc.NetrcParseError, OSError) as exc:
            why = exc.strerror.lower() if isinstance(exc, OSError) and exc.strerror else str(exc)
            raise URLError(f"cannot read {path}: {why}") from exc

    return lookup
