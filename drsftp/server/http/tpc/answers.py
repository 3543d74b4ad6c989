"""What a pull takes of its source's answers, beyond their status and
``Content-Range`` (pull.py):

* the file's own bytes: an answer with a ``Content-Encoding`` other than
  ``identity`` (RFC 9110 sec. 8.4) fails the copy, whatever the request's
  ``Accept-Encoding`` said;
* a known end: a 200 without ``Content-Length`` is taken only chunked, as
  a body that ends when its connection closes (RFC 9112 sec. 6.3) cannot
  tell a source that died from the file's end.
"""

from __future__ import annotations

import aiohttp

NO_LENGTH = ("the source gave no length: a body that ends when its connection closes cannot tell a cut from the"
             " file's end (RFC 9112 sec. 6.3)")


def coding(resp: aiohttp.ClientResponse) -> str | None:
    """The answer's content coding, None for the file's own bytes."""
    codings = ", ".join(resp.headers.getall("Content-Encoding", [])).strip()
    return None if codings.lower() in ("", "identity") else codings[:40]


def chunked(resp: aiohttp.ClientResponse) -> bool:
    return resp.headers.get("Transfer-Encoding", "").rsplit(",", 1)[-1].strip().lower() == "chunked"
