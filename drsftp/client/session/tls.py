"""Client TLS for FTPS (RFC 4217): the context, what a failed check
means in one sentence, and session reuse on data connections.

Certificates are verified against the system store or ``--ca-file``
and the host name or IP is checked; ``--insecure`` alone turns that
off.  Data connections resume the control connection's TLS session
(RFC 4217 sec. 10; vsftpd's ``require_ssl_reuse`` refuses data
connections that do not).
"""

from __future__ import annotations

import ssl
from collections.abc import Callable
from dataclasses import dataclass

from ...io import tlspolicy

IMPLICIT_PORT = 990  # ftps:// (implicit FTPS)


class TLSConfigError(ValueError):
    """A --ca-file that cannot be loaded."""


class _ReusingContext(ssl.SSLContext):
    """An SSLContext whose connections offer the control connection's
    session.  asyncio's TLS transport takes no ``session`` argument; it
    builds each connection with ``wrap_bio``, so the offer is made there."""

    session_source: Callable[[], ssl.SSLSession | None] | None = None

    def wrap_bio(self, incoming, outgoing, server_side=False, server_hostname=None, session=None):
        if session is None and self.session_source is not None:
            session = self.session_source()
        return super().wrap_bio(incoming, outgoing, server_side, server_hostname, session)


@dataclass
class ClientTLS:
    context: ssl.SSLContext
    implicit: bool  # ftps://: TLS from the first byte; else AUTH TLS (explicit)
    insecure: bool

    def reuse_sessions_of(self, source: Callable[[], ssl.SSLSession | None]) -> None:
        """Offer ``source()`` (the control connection's session) on every
        later connection made with this context."""
        self.context.session_source = source  # type: ignore[attr-defined]


def client_tls(ca_file: str | None = None, insecure: bool = False, implicit: bool = False) -> ClientTLS:
    ctx = _ReusingContext(ssl.PROTOCOL_TLS_CLIENT)  # CERT_REQUIRED, check_hostname
    tlspolicy.apply(ctx)  # the server's versions and suites (Mozilla's intermediate profile)
    if insecure:
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    elif ca_file:
        try:
            ctx.load_verify_locations(cafile=ca_file)
        except FileNotFoundError as exc:
            raise TLSConfigError(f"cannot read --ca-file {ca_file}: no such file") from exc
        except (OSError, ssl.SSLError) as exc:
            raise TLSConfigError(f"cannot load --ca-file {ca_file}: not a PEM certificate file") from exc
    else:
        ctx.load_default_certs()
    return ClientTLS(ctx, implicit, insecure)


def failure_sentence(exc: Exception, host: str, plain: str | None = None) -> str:
    """One sentence for a failed TLS handshake; ``plain``: the scheme to
    name when the server answered in plain text (WRONG_VERSION_NUMBER)."""
    if isinstance(exc, ssl.SSLCertVerificationError):
        why = (exc.verify_message or str(exc)).rstrip(".")
        if "mismatch" in why.lower():  # hostname or IP address
            why = f"it is not valid for the name {host}"
        return (f"TLS certificate of {host} not trusted: {why} "
                "(--ca-file names the CA that signed it; --insecure skips the check)")
    reason = getattr(exc, "reason", None) or str(exc) or type(exc).__name__
    hint = f"; is it a plain-text port? use {plain}" if plain and "WRONG_VERSION_NUMBER" in str(reason) else ""
    return f"TLS handshake with {host} failed: {reason}{hint}"
