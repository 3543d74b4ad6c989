"""Users file: hashed passwords, per-user home and permissions.

One user per line, colon-separated (``#`` starts a comment):

    NAME:scrypt$N$r$p$SALT$HASH:HOME:PERM

SALT and HASH are base64; HOME is absolute or relative to the server's
``--root`` (``.`` is the root itself; never the users file's directory,
which holds the hashes: docs/SECURITY.md "Homes"); PERM is pyftpdlib's letters (``elr`` read-only, ``elradfmwMT``
full).  Passwords are never stored in plain text; checks use
``hmac.compare_digest``.  ``drsftp passwd`` writes the file (mode 0600).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import re
import secrets
import threading
from dataclasses import dataclass

from pyftpdlib.authorizers import AuthenticationFailed, DummyAuthorizer

SCRYPT_N, SCRYPT_R, SCRYPT_P = 2**14, 8, 1
NAME_RE = re.compile(r"^[A-Za-z0-9._-]{1,64}$")
PERM_RE = re.compile(r"^[elradfmwMT]+$")
READ_PERM, WRITE_PERM = "elr", "elradfmwMT"
MIN_PASSWORD = 8  # characters: `drsftp passwd` and `drsftp serve --password` (docs/SECURITY.md, "Passwords")


class UsersFileError(ValueError):
    pass


def password_problem(password: str) -> str | None:
    """Why ``password`` may not log a user in, as the end of a sentence, or
    None: the one rule `drsftp passwd` and `drsftp serve` both apply."""
    if not password:
        return "is empty: anyone could log in with write rights"
    if len(password) < MIN_PASSWORD:
        return f"is shorter than {MIN_PASSWORD} characters"
    return None


def hash_password(password: str, *, n: int = SCRYPT_N, r: int = SCRYPT_R, p: int = SCRYPT_P) -> str:
    salt = secrets.token_bytes(16)
    digest = hashlib.scrypt(password.encode(), salt=salt, n=n, r=r, p=p, dklen=32)

    def b64(b: bytes) -> str:
        return base64.b64encode(b).decode()

    return f"scrypt${n}${r}${p}${b64(salt)}${b64(digest)}"


def check_password(stored: str, password: str) -> bool:
    try:
        scheme, n, r, p, salt, digest = stored.split("$")
        if scheme != "scrypt":
            return False
        want = base64.b64decode(digest)
        got = hashlib.scrypt(password.encode(), salt=base64.b64decode(salt), n=int(n), r=int(r), p=int(p),
                             dklen=len(want))
    except (ValueError, TypeError):
        return False
    return hmac.compare_digest(got, want)


@dataclass
class UserEntry:
    name: str
    hashed: str
    home: str
    perm: str

    def line(self) -> str:
        return f"{self.name}:{self.hashed}:{self.home}:{self.perm}"


def read_users(path: str, root: str) -> list[UserEntry]:
    """The users of ``path``; a relative HOME resolves against ``root``."""
    try:
        with open(path) as f:
            text = f.read()
    except OSError as exc:
        raise UsersFileError(f"cannot read users file {path}: {exc.strerror}") from exc
    users, base = [], os.path.abspath(root)
    for no, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        parts = line.split(":")
        if len(parts) != 4:
            raise UsersFileError(f"{path}:{no}: want NAME:HASH:HOME:PERM")
        name, hashed, home, perm = parts
        if not NAME_RE.match(name) or not hashed.startswith("scrypt$") or not PERM_RE.match(perm):
            raise UsersFileError(f"{path}:{no}: bad user name, hash or permissions")
        users.append(UserEntry(name, hashed, os.path.normpath(os.path.join(base, home)), perm))
    return users


def write_user(path: str, entry: UserEntry, delete: bool = False) -> None:
    """Add, replace or delete one user; the file stays mode 0600."""
    lines = []
    if os.path.exists(path):
        with open(path) as f:
            lines = [ln for ln in f.read().splitlines() if ln.split(":", 1)[0] != entry.name]
    if not delete:
        lines.append(entry.line())
    tmp = path + ".tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write("\n".join(lines) + "\n")
    os.replace(tmp, path)


class HashedAuthorizer(DummyAuthorizer):
    """pyftpdlib's authorizer with scrypt-hashed passwords.

    scrypt costs ~50 ms of CPU by design, on the server's one event loop:
    a client opening 16 sessions stalled every transfer for 0.8 s.  A
    password that verified once is remembered as an HMAC under a key that
    lives only in this process, so its next logins cost microseconds; a
    wrong password is never remembered and always pays scrypt.  The HTTP
    side checks in its executor's threads: logins with one password that
    arrive together (a tree's first requests, each on a new connection)
    wait for the first one's scrypt instead of each running their own.  A
    reload (SIGHUP) builds a new authorizer, and so a new memory."""

    VERIFIED_MAX = 1024  # remembered (user, hash, password) triples

    def __init__(self) -> None:
        super().__init__()
        self._key = secrets.token_bytes(32)
        self._verified: set[tuple[str, str, bytes]] = set()
        self._guard = threading.Lock()
        self._gates: dict[tuple[str, str, bytes], tuple[threading.Lock, int]] = {}  # a checked password's, users

    def _mac(self, password: str) -> bytes:
        return hmac.digest(self._key, password.encode("utf-8", "surrogateescape"), "sha256")

    def _check(self, username: str, stored: str, password: str) -> bool:
        key = (username, stored, self._mac(password))
        if key in self._verified:
            return True
        with self._guard:
            gate, users = self._gates.get(key, (None, 0))
            gate = gate or threading.Lock()
            self._gates[key] = (gate, users + 1)
        try:
            with gate:  # (one scrypt a password at a time: those that waited find it remembered)
                if key in self._verified:
                    return True
                if not check_password(stored, password):
                    return False
                if len(self._verified) >= self.VERIFIED_MAX:
                    self._verified.clear()
                self._verified.add(key)
                return True
        finally:
            with self._guard:
                users = self._gates[key][1] - 1
                if users:
                    self._gates[key] = (gate, users)
                else:
                    del self._gates[key]

    def add_hashed_user(self, entry: UserEntry) -> None:
        if not os.path.isdir(entry.home):
            raise UsersFileError(f"home of {entry.name!r} does not exist: {entry.home}")
        self.add_user(entry.name, entry.hashed, entry.home, perm=entry.perm)

    # A user a reload (SIGHUP) removed keeps no rights in a session still open.
    def has_perm(self, username, perm, path=None):
        return username in self.user_table and super().has_perm(username, perm, path)

    def get_perms(self, username):
        return self.user_table[username]["perm"] if username in self.user_table else ""

    def validate_authentication(self, username, password, handler):
        user = self.user_table.get(username)
        if username == "anonymous" and user is not None:
            return  # only present with --anonymous-read, and read-only
        if user is None or not self._check(username, user["pwd"], password):
            raise AuthenticationFailed("Authentication failed.")


def exposed_secret(homes: dict[str, str], secrets: dict[str, str]) -> str | None:
    """The first secret a user's home would serve, as one sentence, or None.

    ``homes``: user -> home directory; ``secrets``: what -> file (the users
    file, the TLS key, the config file).  A file is exposed when its real
    path lies at or below a home's real path: pyftpdlib serves everything
    below a home (symlinks resolved), docs/SECURITY.md "Homes"."""
    for name, home in homes.items():
        real_home = os.path.realpath(home)
        for what, path in secrets.items():
            real = os.path.realpath(path)
            if os.path.commonpath([real_home, real]) == real_home:
                return (f"user {name!r} would be served {what} {path} (home {home}):"
                        f" keep it outside every user's home and --root")
    return None
