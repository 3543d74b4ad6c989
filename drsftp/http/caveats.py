"""Macaroon caveats of the WLCG storage convention, sans-IO (docs/HTTP.md,
"Third-party copy"): what a ``POST`` with ``Content-Type:
application/macaroon-request`` asks for, and what a bearer macaroon's
caveats allow.

The request body is dCache's and XRootD's (the one gfal2 and FTS3 send):
``{"caveats": ["activity:DOWNLOAD,LIST", ...], "validity": "PT30M"}``; the
validity is an ISO 8601 duration.  A minted macaroon carries
``activity:A,B`` (the operations it allows), ``path:/p`` (the request's
path: the token holds for it and below), ``before:<ISO 8601 UTC>`` and
``name:<user>``.  Every caveat narrows: several ``activity:`` caveats
allow what all of them list, several ``path:`` caveats the paths inside
all of them, and the earliest ``before:`` ends it.  The signature itself
is checked by the server (pymacaroons); this module reads the caveats.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

CONTENT_TYPE = "application/macaroon-request"
ACTIVITIES = ("DOWNLOAD", "UPLOAD", "LIST", "DELETE", "MANAGE", "READ_METADATA", "UPDATE_METADATA")
MAX_VALIDITY = 24 * 3600  # s a minted macaroon lives at most (a longer request is capped)
DEFAULT_VALIDITY = 3600  # s, when the request names none
MAX_BODY = 16 * 1024  # bytes of a macaroon request
MAX_CAVEATS = 32
# What each method needs (any one of them): XRootD's and dCache's readings.
# COPY needs UPLOAD when it pulls into the target, DOWNLOAD when it pushes it.
NEEDS: dict[str, frozenset[str]] = {
    "GET": frozenset({"DOWNLOAD"}),
    "HEAD": frozenset({"DOWNLOAD", "READ_METADATA", "LIST", "UPLOAD", "MANAGE"}),
    "PROPFIND": frozenset({"LIST", "READ_METADATA"}),
    "PUT": frozenset({"UPLOAD"}),
    "DELETE": frozenset({"DELETE"}),
    "MKCOL": frozenset({"MANAGE", "UPLOAD"}),
    "MOVE": frozenset({"MANAGE", "UPDATE_METADATA"}),
    "COPY-PULL": frozenset({"UPLOAD"}),
    "COPY-PUSH": frozenset({"DOWNLOAD"}),
    "OPTIONS": frozenset(ACTIVITIES),
    "POST": frozenset(ACTIVITIES),
}
_DURATION = re.compile(r"P(?:(\d{1,6})W)?(?:(\d{1,6})D)?(?:T(?:(\d{1,7})H)?(?:(\d{1,9})M)?(?:(\d{1,10})S)?)?")


class CaveatError(ValueError):
    """A macaroon request (or a caveat) that cannot be read: one sentence."""


@dataclass(frozen=True)
class Request:
    activities: frozenset[str]  # empty: every activity the login allows
    paths: tuple[str, ...]  # path: caveats asked for (besides the request's path)
    validity: int  # seconds


def parse_duration(text: str) -> int:
    """Seconds of an ISO 8601 duration (``PT30M``, ``P1DT2H``, ``PT45S``)."""
    m = _DURATION.fullmatch(text.strip().upper())
    if not m or text.strip().upper() in ("P", "PT") or text.strip().upper().endswith("T"):
        raise CaveatError(f"validity {text[:40]!r} is not an ISO 8601 duration such as PT30M")
    w, d, h, mi, s = (int(x) if x else 0 for x in m.groups())
    return (((w * 7 + d) * 24 + h) * 60 + mi) * 60 + s


def parse_activities(value: str) -> frozenset[str]:
    names = [a.strip().upper() for a in value.split(",") if a.strip()]
    unknown = [a for a in names if a not in ACTIVITIES]
    if unknown or not names:
        raise CaveatError(f"activity {','.join(unknown)[:60] or '(none)'} is not one of {', '.join(ACTIVITIES)}")
    return frozenset(names)


def parse_request(body: bytes) -> Request:
    """The macaroon request's caveats and validity (capped at MAX_VALIDITY)."""
    if len(body) > MAX_BODY:
        raise CaveatError(f"a macaroon request holds {MAX_BODY} bytes at most")
    try:
        doc = json.loads(body.decode("utf-8")) if body.strip() else {}
    except (UnicodeDecodeError, ValueError):
        raise CaveatError("the macaroon request is not JSON") from None
    if not isinstance(doc, dict):
        raise CaveatError("the macaroon request is not a JSON object")
    caveats = doc.get("caveats", [])
    if not isinstance(caveats, list) or len(caveats) > MAX_CAVEATS or not all(isinstance(c, str) for c in caveats):
        raise CaveatError(f"caveats must be a list of at most {MAX_CAVEATS} strings")
    validity = doc.get("validity")
    seconds = DEFAULT_VALIDITY if validity is None else None
    if validity is not None:
        if not isinstance(validity, str):
            raise CaveatError("validity must be an ISO 8601 duration string such as PT30M")
        seconds = parse_duration(validity)
    assert seconds is not None
    if seconds <= 0:
        raise CaveatError("validity must be longer than zero")
    grant = _scan(caveats, names=False)
    if grant.before is not None:
        seconds = min(seconds, max(0, int((grant.before - datetime.now(UTC)).total_seconds())))
    return Request(grant.activities or frozenset(), grant.paths, min(seconds, MAX_VALIDITY))


def _path(value: str) -> str:
    path = "/" + value.strip().strip("/")
    if "\x00" in path or any(p in (".", "..") for p in path.split("/")):
        raise CaveatError(f"path {value[:60]!r} is not a plain absolute path")
    return path


def format_time(when: datetime) -> str:
    return when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_time(value: str) -> datetime:
    try:
        when = datetime.fromisoformat(value.strip())
    except ValueError:
        raise CaveatError(f"before {value[:40]!r} is not an ISO 8601 time") from None
    return when if when.tzinfo is not None else when.replace(tzinfo=UTC)


def expiry(now: datetime, seconds: int) -> datetime:
    return now + timedelta(seconds=min(seconds, MAX_VALIDITY))


def within(path: str, scope: str) -> bool:
    """``path`` is ``scope`` or below it (``/a`` holds ``/a/b``, not ``/ab``)."""
    scope = scope.rstrip("/")
    return not scope or path == scope or path.startswith(scope + "/")


@dataclass(frozen=True)
class Grant:
    """What a verified macaroon's caveats say."""

    user: str | None
    activities: frozenset[str] | None  # None: no activity caveat (every activity)
    paths: tuple[str, ...]
    before: datetime | None

    def expired(self, now: datetime) -> bool:
        return self.before is not None and now >= self.before

    def refusal(self, method: str, path: str) -> str | None:
        """Why the grant does not cover ``method`` on ``path`` (None: it does)."""
        for scope in self.paths:
            if not within(path, scope):
                return f"the token holds for {scope} and below, not {path}"
        need = NEEDS.get(method, frozenset())
        if self.activities is not None and not (need & self.activities):
            wanted = " or ".join(sorted(need)) or method
            return f"the token allows {','.join(sorted(self.activities))}, not {wanted} ({method.split('-')[0]})"
        return None


def read_caveats(caveats: list[str]) -> Grant:
    """The grant of a macaroon's first-party caveats; one this module does
    not know raises CaveatError (a token is never wider for a caveat the
    server cannot read)."""
    return _scan(caveats, names=True)


def _scan(caveats: list[str], names: bool) -> Grant:
    """The caveats' grant: activities and paths narrow it, the earliest
    ``before`` ends it; ``name:`` only in a token (``names``), never in a
    request for one."""
    user: str | None = None
    activities: frozenset[str] | None = None
    paths: list[str] = []
    before: datetime | None = None
    for caveat in caveats:
        key, sep, value = caveat.partition(":")
        key = key.strip().lower()
        if not sep:
            raise CaveatError(f"caveat {caveat[:40]!r} is not KEY:VALUE")
        if key == "activity":
            wanted = parse_activities(value)
            activities = wanted if activities is None else activities & wanted
        elif key == "path":
            paths.append(_path(value))
        elif key == "before":
            when = parse_time(value)
            before = when if before is None else min(before, when)
        elif key == "name" and names:
            if user is not None and user != value.strip():
                raise CaveatError("the token names two users")
            user = value.strip()
        else:
            known = "" if names else " (activity, path, before)"
            raise CaveatError(f"caveat {key[:20]!r} is not understood here{known}")
    return Grant(user, activities, tuple(paths), before)
