"""The one place the HTTP server touches aiohttp's private names (aiohttp 3.14).

aiohttp has no public setting for these; a release may rename them, and
tests/test_http_server.py checks each helper's effect on the wire.
"""

from __future__ import annotations

from aiohttp import web_response


def name_the_server(name: str) -> None:
    """Every response aiohttp makes, its own error answers too, says
    ``Server: name``: its default names Python's version and its own,
    detail RFC 9110 sec. 10.2.4 warns against."""
    web_response.SERVER_SOFTWARE = name  # (read when a response's headers are made)
