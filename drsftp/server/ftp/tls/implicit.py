"""Implicit FTPS (``ftps://``, port 990 by convention): a second listener
of `drsftp serve` whose connections are TLS from the first byte.

RFC 4217 defines only explicit FTPS (AUTH TLS); implicit FTPS is the
practice Microsoft's [MS-FTPS] writes down ("Control Connection
Negotiation with Implicit FTPS"): the TLS handshake comes before the 220
greeting, as if AUTH TLS had been answered 234, and PBSZ 0 and PROT P are
in force without being sent.  A client that sends them all the same
(curl, lftp and drsftp do) gets 200; AUTH TLS gets 503 (TLS is on).  The certificate, users,
limits and the TLS policy are those of the explicit listener.
"""

from __future__ import annotations

from .. import compat


class ImplicitTLSMixin:
    """Put in front of the server's TLS handler class: the handshake
    first, then the greeting (or a 421 refusal) under TLS."""

    _after_handshake = None

    def handle(self):
        self._handshake_first(super().handle)

    def handle_max_cons(self):
        self._handshake_first(super().handle_max_cons)

    def handle_max_cons_per_ip(self):
        self._handshake_first(super().handle_max_cons_per_ip)

    def _handshake_first(self, then) -> None:
        self._after_handshake = then
        self.secure_connection(self.ssl_context)  # type: ignore[attr-defined]

    def handle_ssl_established(self):
        then, self._after_handshake = self._after_handshake, None
        if then is not None:
            compat.protect_data_by_default(self)
            then()

    def flush_account(self):
        """REIN, or USER after a login, resets the session: to PROT P here."""
        super().flush_account()
        compat.protect_data_by_default(self)


def handler_class(base: type) -> type:
    """The implicit listener's handler: ``base`` (the configured TLS
    handler, whose class attributes a reload replaces) with the handshake
    first."""
    return type(f"Implicit{base.__name__}", (ImplicitTLSMixin, base), {})
