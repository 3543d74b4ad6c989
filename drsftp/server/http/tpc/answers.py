"""What a pull takes of its source's answers, beyond their status and
``Content-Range`` (pull.py):

* the file's own bytes: an answer with a ``Content-Encoding`` other than
  ``identity`` (RFC 9110 sec. 8.4) fails the copy, whatever the request's
  ``Accept-Encoding`` said.
"""

from __future__ import annotations

import aiohttp


def coding(resp: aiohttp.ClientResponse) -> str | None:
    """The answer's content coding, None for the file's own bytes."""
    codings = ", ".join(resp.headers.getall("Content-Encoding", [])).strip()
    return None if codings.lower() in ("", "identity") else codings[:40]
