"""The one TLS policy of every drsftp connection, client and server:
control connections, stream-mode data channels and MODE E streams.

It is Mozilla's "intermediate" configuration (Server Side TLS,
https://wiki.mozilla.org/Security/Server_Side_TLS): TLS 1.2 and 1.3 only;
under TLS 1.2 only ECDHE key exchange (forward secrecy) with AEAD ciphers,
AES-GCM and ChaCha20-Poly1305, so no CBC suite (LUCKY13 and the other
padding-oracle attacks on MAC-then-encrypt).  The profile's finite-field
DHE suites are left out: no DH parameters are configured, so a server
could not choose them.  TLS 1.3 has AEAD suites only; OpenSSL's default
set of them (AES-GCM, ChaCha20-Poly1305) is the profile's.
"""

from __future__ import annotations

import ssl

MIN_VERSION = ssl.TLSVersion.TLSv1_2

# TLS 1.2 suites, in the profile's order (OpenSSL names); ECDSA and RSA
# certificates alike.
TLS12_CIPHERS = ":".join((
    "ECDHE-ECDSA-AES128-GCM-SHA256", "ECDHE-RSA-AES128-GCM-SHA256",
    "ECDHE-ECDSA-AES256-GCM-SHA384", "ECDHE-RSA-AES256-GCM-SHA384",
    "ECDHE-ECDSA-CHACHA20-POLY1305", "ECDHE-RSA-CHACHA20-POLY1305",
))


def apply(ctx: ssl.SSLContext) -> ssl.SSLContext:
    """The policy on a standard-library context (the client's, and the
    server's MODE E streams')."""
    ctx.minimum_version = MIN_VERSION
    ctx.set_ciphers(TLS12_CIPHERS)
    return ctx


def apply_openssl(ctx) -> None:
    """The policy on a pyOpenSSL ``SSL.Context`` (the server's control
    connection and stream-mode data channels: pyftpdlib's TLS)."""
    from OpenSSL import SSL

    ctx.set_min_proto_version(SSL.TLS1_2_VERSION)
    ctx.set_cipher_list(TLS12_CIPHERS.encode("ascii"))
