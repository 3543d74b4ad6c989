"""aiohttp's import, made by the command line before the client's HTTP
modules load, without aiohttp's default trust store (decision 0045).

aiohttp builds two default TLS client contexts when it is imported, each
loading the system's CA bundle (~50 ms, a quarter of the import).  The
client never uses them: every connector it makes is given the context of
``--ca-file``/``--insecure`` (pool.py, session/tls.py).  So in a process
with one thread, loading the default verify paths does nothing while the
import runs; a session that fell back to those contexts would trust no
server (it fails, closed).
"""

from __future__ import annotations

import ssl
import sys
import threading


def load() -> None:
    """Import aiohttp (once); the client's modules then find it loaded."""
    cls = ssl.SSLContext
    # (another thread may build a context meanwhile; another library may have replaced the method)
    if "aiohttp" in sys.modules or threading.active_count() > 1 or "set_default_verify_paths" in vars(cls):
        import aiohttp

        return
    cls.set_default_verify_paths = lambda self: None  # type: ignore[method-assign]
    try:
        import aiohttp  # noqa: F401
    finally:
        del cls.set_default_verify_paths  # (the method _ssl's base class defines, again)
