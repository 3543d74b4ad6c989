"""The certificate and key `drsftp serve` loads for FTPS (RFC 4217), at
start and on SIGHUP.  Each problem is one sentence that says what to do
(OpenSSL's own errors are tuples of library names); an encrypted key is
refused before OpenSSL sees it, since OpenSSL would ask for its passphrase
on the terminal of a server that runs unattended."""

from __future__ import annotations

import re
import ssl

from ..io import tlspolicy
from .config import ConfigError

_CERT = re.compile(rb"^-----BEGIN CERTIFICATE-----", re.MULTILINE)
_KEY = re.compile(rb"^-----BEGIN (?:[A-Z0-9]+ )?PRIVATE KEY-----", re.MULTILINE)
_ENCRYPTED = re.compile(rb"^-----BEGIN ENCRYPTED PRIVATE KEY-----|^Proc-Type: *4, *ENCRYPTED", re.MULTILINE)
MAX_PEM = 16 << 20  # bytes read of each file (a chain and its key: a few KiB)


def _read(path: str, what: str, option: str) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read(MAX_PEM)
    except FileNotFoundError:
        raise ConfigError(f"{what} {path} does not exist: give the PEM file's path with {option}") from None
    except IsADirectoryError:
        raise ConfigError(f"{what} {path} is a directory: give the PEM file in it with {option}") from None
    except OSError as exc:
        raise ConfigError(f"cannot read {what} {path}: {exc.strerror} (the server's user must be able to"
                          " read it)") from None


def check(cert: str, key: str | None) -> None:
    """What is wrong with the files, before OpenSSL loads them (ConfigError)."""
    cert_pem = _read(cert, "the TLS certificate", "--tls-cert")
    if not _CERT.search(cert_pem):
        raise ConfigError(f"the TLS certificate {cert} holds no PEM certificate (-----BEGIN CERTIFICATE-----):"
                          " give the certificate chain's PEM file with --tls-cert")
    key_pem = _read(key, "the TLS key", "--tls-key") if key else cert_pem
    if not _KEY.search(key_pem):
        if key:
            raise ConfigError(f"the TLS key {key} holds no PEM private key (-----BEGIN PRIVATE KEY-----):"
                              " give the certificate's key file with --tls-key")
        raise ConfigError(f"the TLS certificate {cert} holds no private key: give the key's PEM file with"
                          " --tls-key")
    if _ENCRYPTED.search(key_pem):
        raise ConfigError(f"the TLS key in {key or cert} is encrypted: give it decrypted (the server starts"
                          " unattended), e.g. from openssl pkey -in KEY -out PLAIN.pem")


def _openssl_words(exc: Exception) -> str:
    """'PEM lib' from "[SSL] PEM lib (_ssl.c:3926)"; pyOpenSSL's
    [('SSL routines', '', 'PEM lib')] gives its last reason."""
    if isinstance(exc, ssl.SSLError) and len(exc.args) > 1:
        return re.sub(r"^\[\w+\] *| *\(_ssl\.c:\d+\)$", "", str(exc.args[1]))
    errors = exc.args[0] if exc.args and isinstance(exc.args[0], list) else None
    if errors and isinstance(errors[-1], tuple) and errors[-1]:
        return str(errors[-1][-1])
    return str(exc)


def control_context(handler):
    """The control connection's and the stream-mode data channels' context
    (pyOpenSSL, pyftpdlib's TLS, which takes a context made here as it
    is): pyftpdlib's options (no SSLv2/3, no compression) and drsftp's
    policy (drsftp.io.tlspolicy)."""
    from OpenSSL import SSL

    ctx = SSL.Context(SSL.TLS_SERVER_METHOD)
    ctx.set_options(handler.ssl_options)
    tlspolicy.apply_openssl(ctx)
    ctx.use_certificate_chain_file(handler.certfile)
    ctx.use_privatekey_file(handler.keyfile)
    ctx.check_privatekey()
    return ctx


def client_context(handler):
    """The stream-mode data channels' context in the TLS client's role
    (SSCN ON, ftp/tls/sscn.py): drsftp's policy; the other server's certificate
    is not checked (the client checked it on its control connection)."""
    from OpenSSL import SSL

    ctx = SSL.Context(SSL.TLS_CLIENT_METHOD)
    ctx.set_options(handler.ssl_options)
    tlspolicy.apply_openssl(ctx)
    ctx.set_verify(SSL.VERIFY_NONE, None)
    return ctx


def load(handler) -> None:
    """The control connection's context (pyOpenSSL, pyftpdlib's) and the
    MODE E streams' (the standard library's) from ``handler.certfile`` and
    ``handler.keyfile``; ConfigError when they do not load, and the
    handler keeps the contexts it had."""
    from OpenSSL import SSL

    from .ftp.eblock import tls as etls

    cert, key = handler.certfile, handler.keyfile
    check(cert, None if key == cert else key)
    try:
        streams = etls.server_context(cert, key)
        control = control_context(handler)
    except (ssl.SSLError, SSL.Error, OSError, ValueError) as exc:
        if isinstance(exc, ssl.SSLError) and exc.reason == "KEY_VALUES_MISMATCH":
            raise ConfigError(f"the TLS key {key} is not the key of the certificate {cert}: give the"
                              " certificate's own key") from None
        why = exc.reason if isinstance(exc, ssl.SSLError) and exc.reason else _openssl_words(exc)
        raise ConfigError(f"cannot load the TLS certificate {cert} with the key {key}: check that they are"
                          f" the PEM files of one certificate and its key (OpenSSL: {why})") from None
    handler.ssl_context, handler.etls_context = control, streams
    handler.ssl_client_context, handler.etls_client_context = client_context(handler), etls.client_context()
