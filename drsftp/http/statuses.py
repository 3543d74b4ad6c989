"""What an HTTP status the client did not want means, in one sentence
(RFC 9110 sec. 15; WebDAV's: RFC 4918 sec. 11), sans-IO."""

from __future__ import annotations

_SENTENCES = {
    400: "the server refused the request as malformed",
    401: "login refused: wrong or missing user or password (give them in the URL or ~/.netrc)",
    403: "permission denied",
    404: "no such file or directory",
    405: "the server does not allow this here",
    408: "the server timed the request out",
    409: "conflict: the parent directory is missing, or the name is taken by another kind of entry",
    411: "the server wants a Content-Length",
    412: "a precondition failed (the target changed or exists)",
    413: "the server refused the upload as too large",
    414: "the URL is too long for the server",
    416: "the range asked for lies outside the file (did the file change?)",
    423: "the resource is locked",
    429: "the server is busy: too many requests",
    500: "the server failed (internal error)",
    501: "the server does not implement this method",
    502: "a gateway in front of the server failed",
    503: "the server is unavailable",
    504: "a gateway in front of the server timed out",
    507: "the server has no space left for it",
}

TRANSIENT = frozenset({408, 429, 500, 502, 503, 504})  # worth a retry (RFC 9110 sec. 15.6)


def status_sentence(status: int, reason: str | None = None) -> str:
    """``permission denied (HTTP 403)``; an unlisted status by its class."""
    text = _SENTENCES.get(status)
    if text is None:
        kind = "refused the request" if 400 <= status < 500 else "failed" if status >= 500 else "answered unexpectedly"
        shown = "".join(c for c in (reason or "")[:60] if c.isprintable())
        text = f"the server {kind}" + (f": {shown}" if shown else "")
    return f"{text} (HTTP {status})"
