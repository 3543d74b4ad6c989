"""HTTP Basic (RFC 7617) against the FTP side's users (ops/users.py).

The authorizer is read from the FTP handler class at each request, so a
SIGHUP's reload applies at once.  HashedAuthorizer remembers a verified
password as an HMAC under a per-process key (scrypt is paid once per
credential, never for a wrong one remembered); its check runs in a
pool of its own (LOGINS, two threads), so a login's scrypt never stalls
the other connections, and a flood of wrong passwords queues there, not
before the file reads and writes in the loop's executor.
Without credentials, ``--anonymous-read`` lets the reading methods through;
a write (or any method without anonymous read) is answered 401 with the
challenge, a user without the right permission 403.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from pyftpdlib.authorizers import AuthenticationFailed

from .problem import Problem

REALM = 'Basic realm="drsftp"'
READING = frozenset({"GET", "HEAD", "PROPFIND", "OPTIONS"})
LOGINS = ThreadPoolExecutor(max_workers=2, thread_name_prefix="drsftp-login")  # password checks (scrypt)
MAX_CREDENTIALS = 1024  # characters of an Authorization header decoded at most
# The permission letter each method needs (pyftpdlib's: r read, l list,
# w store, d delete, m make directory, f rename).
PERMS = {"GET": "r", "HEAD": "r", "PROPFIND": "l", "OPTIONS": "e", "PUT": "w", "DELETE": "d",
         "MKCOL": "m", "MOVE": "f"}


@dataclass(frozen=True)
class Login:
    user: str
    home: str
    perm: str
    anonymous: bool = False

    def may(self, letter: str) -> bool:
        return letter in self.perm


def challenge(sentence: str) -> Problem:
    return Problem(401, sentence, {"WWW-Authenticate": REALM})


async def login(authorizer, method: str, header: str | None) -> Login:
    """The request's user; raises 401 (:class:`Refused` for a wrong password)."""
    if header is None:
        if method in READING and authorizer.has_user("anonymous"):
            return _login(authorizer, "anonymous", True)
        raise challenge("log in: this server wants HTTP Basic credentials.")
    scheme, _, value = header.strip().partition(" ")
    if scheme.lower() != "basic" or len(value) > MAX_CREDENTIALS:
        raise challenge("only HTTP Basic credentials are accepted here.")
    try:
        user, sep, password = base64.b64decode(value.strip(), validate=True).decode("utf-8").partition(":")
    except (binascii.Error, UnicodeDecodeError):
        raise challenge("the Basic credentials are not base64 of UTF-8 user:password.") from None
    if not sep or not user:
        raise challenge("the Basic credentials hold no user name.")
    if user == "anonymous":
        if method in READING and authorizer.has_user("anonymous"):
            return _login(authorizer, "anonymous", True)
        raise challenge("anonymous access is read-only here, if allowed at all.")
    loop = asyncio.get_running_loop()
    try:
        await loop.run_in_executor(LOGINS, authorizer.validate_authentication, user, password, None)
    except AuthenticationFailed:
        raise Refused(user) from None
    if not authorizer.has_user(user):  # removed by a reload meanwhile
        raise Refused(user)
    return _login(authorizer, user, False)


class Refused(Problem):
    """A login with a wrong password (the transfer log's ``login ok=no``)."""

    def __init__(self, user: str) -> None:
        super().__init__(401, "the user name or password is wrong.", {"WWW-Authenticate": REALM})
        self.user = user


def _login(authorizer, user: str, anonymous: bool) -> Login:
    return Login(user, authorizer.get_home_dir(user), authorizer.get_perms(user), anonymous)


def check_perm(who: Login, method: str) -> None:
    letter = PERMS.get(method)
    if letter is None or who.may(letter):
        return
    if who.anonymous:
        raise challenge(f"{method} needs a login with write rights.")
    raise Problem(403, f"user {who.user!r} may not {method} here.")
