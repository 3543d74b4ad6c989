"""What a pull takes of its source's answers, beyond their status and
``Content-Range`` (pull.py):

* the file's own bytes: an answer with a ``Content-Encoding`` other than
  ``identity`` (RFC 9110 sec. 8.4) fails the copy, whatever the request's
  ``Accept-Encoding`` said;
* a known end: a 200 without ``Content-Length`` is taken only chunked, as
  a body that ends when its connection closes (RFC 9112 sec. 6.3) cannot
  tell a source that died from the file's end;
* one version of the file: the first answer's ``ETag`` (else its
  ``Last-Modified``) is pinned; the later ranges ask ``If-Match`` with a
  strong ETag (RFC 9110 sec. 13.1.1) and are compared with it, a 412 or
  another value failing the copy rather than splicing two versions.
"""

from __future__ import annotations

import aiohttp

from ....http import spans
from .copy import CopyFailed

NO_LENGTH = ("the source gave no length: a body that ends when its connection closes cannot tell a cut from the"
             " file's end (RFC 9112 sec. 6.3)")

Validator = tuple[str, str]  # (the header, its value)


def coding(resp: aiohttp.ClientResponse) -> str | None:
    """The answer's content coding, None for the file's own bytes."""
    return spans.content_coding(resp.headers.getall("Content-Encoding", []))


def chunked(resp: aiohttp.ClientResponse) -> bool:
    return resp.headers.get("Transfer-Encoding", "").rsplit(",", 1)[-1].strip().lower() == "chunked"


def validator(resp: aiohttp.ClientResponse) -> Validator | None:
    for name in ("ETag", "Last-Modified"):
        if value := resp.headers.get(name, "").strip():
            return name, value
    return None


def if_match(pinned: Validator | None) -> list[tuple[str, str]]:
    """The later ranges' precondition: a strong ETag only (a weak one never matches, RFC 9110 sec. 13.1.1)."""
    if pinned is None or pinned[0] != "ETag" or pinned[1].startswith("W/"):
        return []
    return [("If-Match", pinned[1])]


def changed(pinned: Validator, how: str) -> str:
    return f"the source file changed during the copy ({how}; its {pinned[0]} was {pinned[1][:80]})"


def same_file(pinned: Validator | None, resp: aiohttp.ClientResponse) -> None:
    """A later answer of the same version as the first (else CopyFailed)."""
    if pinned is None:
        return
    now = resp.headers.get(pinned[0], "").strip()
    if now and now != pinned[1]:
        raise CopyFailed(changed(pinned, f"now {now[:80]}"))
