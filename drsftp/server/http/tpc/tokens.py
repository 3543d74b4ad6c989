"""Macaroons (docs/HTTP.md, "Third-party copy"; docs/SECURITY.md "Tokens"):
minted on ``POST`` with ``Content-Type: application/macaroon-request`` for
a logged-in user, accepted as ``Authorization: Bearer`` on every method.

The HMAC chain is pymacaroons' (a kept library, not crypto of our own),
keyed by the server's secret: ``--macaroon-secret-file`` (its bytes, 32 at
least), else 32 random bytes drawn at start, so that the tokens of one
process die with it.  The caveats are the convention's (http/caveats.py):
a verified token names its user, who must still exist with the rights
the method needs; a bad signature, an unknown caveat or an expired token
is 401, a path or activity outside the token 403.
"""

from __future__ import annotations

import json
import logging
import secrets
from datetime import UTC, datetime
from urllib.parse import quote

from pymacaroons import Macaroon, Verifier
from pymacaroons.exceptions import MacaroonException

from ....http import caveats
from ...config import ConfigError
from ..auth import REALM, Login, _login
from ..problem import Problem

log = logging.getLogger("drsftp.server")

LOCATION = "drsftp"
MIN_SECRET = 32  # bytes of a --macaroon-secret-file
MAX_TOKEN = 8192  # characters of a bearer token read at most
BEARER_REALM = 'Bearer realm="drsftp"'


def load_secret(path: str | None) -> bytes:
    if path is None:
        return secrets.token_bytes(MIN_SECRET)
    try:
        with open(path, "rb") as f:
            secret = f.read(4096).strip()
    except OSError as exc:
        raise ConfigError(f"cannot read --macaroon-secret-file {path}: {exc.strerror or exc}") from exc
    if len(secret) < MIN_SECRET:
        raise ConfigError(f"--macaroon-secret-file {path} holds {len(secret)} bytes: a secret of {MIN_SECRET}"
                          " bytes or more is needed (e.g. head -c 48 /dev/urandom | base64 > FILE)")
    return secret


def unauthorized(sentence: str) -> Problem:
    return Problem(401, sentence, {"WWW-Authenticate": f"{BEARER_REALM}, {REALM}"})


class Tokens:
    def __init__(self, secret: bytes) -> None:
        self.secret = secret

    def mint(self, who: Login, href: str, body: bytes, base: str, grant: caveats.Grant | None) -> bytes:
        """The JSON answer to a macaroon request for ``href`` (``grant``: the
        bearer token the request came with, whose caveats the new one keeps)."""
        try:
            req = caveats.parse_request(body)
        except caveats.CaveatError as exc:
            raise Problem(400, f"{exc}.") from None
        for path in req.paths:
            if not caveats.within(path, href):
                raise Problem(400, f"the path caveat {path} lies outside the request's path {href}.")
        now = datetime.now(UTC)
        activities = req.activities or frozenset(caveats.ACTIVITIES)
        mac = Macaroon(location=LOCATION, identifier=secrets.token_hex(16), key=self.secret)
        mac.add_first_party_caveat(f"name:{who.user}")
        mac.add_first_party_caveat(f"activity:{','.join(a for a in caveats.ACTIVITIES if a in activities)}")
        mac.add_first_party_caveat(f"path:{href}")
        for path in req.paths:
            mac.add_first_party_caveat(f"path:{path}")
        before = caveats.expiry(now, req.validity)
        if grant is not None:  # never wider than the token that asked
            if grant.activities is not None:
                mac.add_first_party_caveat(f"activity:{','.join(sorted(grant.activities))}")
            for path in grant.paths:
                mac.add_first_party_caveat(f"path:{path}")
            if grant.before is not None:
                before = min(before, grant.before)
        mac.add_first_party_caveat(f"before:{caveats.format_time(before)}")
        token = mac.serialize()
        target = base + quote(href, safe="/")
        log.info("http: macaroon for %s on %s (%s, until %s)", who.user, href, ",".join(sorted(activities)),
                 caveats.format_time(before))
        return json.dumps({"macaroon": token, "uri": {
            "targetWithMacaroon": f"{target}?authz={token}", "baseWithMacaroon": f"{base}/?authz={token}",
            "target": target, "base": base + "/"}}).encode()

    def verify(self, token: str) -> caveats.Grant:
        """The grant of a bearer token; 401 when it is not one of ours, or expired."""
        if len(token) > MAX_TOKEN:
            raise unauthorized("the bearer token is too long.")
        try:
            mac = Macaroon.deserialize(token.strip())
        except Exception:  # (pymacaroons raises what its decoders raise)
            raise unauthorized("the bearer token is not a macaroon.") from None
        seen: list[str] = []

        def note(caveat: str) -> bool:  # every caveat is read below, once the signature holds
            seen.append(caveat)
            return True

        v = Verifier()
        v.satisfy_general(note)
        try:
            v.verify(mac, self.secret)
        except MacaroonException:
            raise unauthorized("the macaroon's signature does not verify: it is not this server's, or was"
                               " altered.") from None
        try:
            grant = caveats.read_caveats(seen)
        except caveats.CaveatError as exc:
            raise unauthorized(f"the macaroon cannot be read here: {exc}.") from None
        if grant.user is None:
            raise unauthorized("the macaroon names no user.")
        if grant.expired(datetime.now(UTC)):
            raise unauthorized("the macaroon has expired: ask for a new one.")
        return grant

    def login(self, authorizer, grant: caveats.Grant) -> Login:
        user = grant.user or ""
        if not authorizer.has_user(user) or user == "anonymous":
            raise unauthorized(f"the macaroon's user {user!r} is not a user here any more.")
        return _login(authorizer, user, False)


def check_scope(grant: caveats.Grant, method: str, href: str) -> None:
    """403 with the reason when the token does not cover ``method`` on ``href``."""
    why = grant.refusal(method, href)
    if why is not None:
        raise Problem(403, f"{why}.")
