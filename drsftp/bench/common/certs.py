"""The TLS certificates of one bench run (the field's HTTPS columns, the
third-party bench's HTTP rows): a CA made for the run and a server
certificate it signs for the servers' addresses, in the run's workdir
(removed with it).  drsftp's client trusts the CA by --ca-file, davix by
--capath and gfal2 by X509_CERT_DIR (the hashed directory), a drsftp
serve's COPY by --tpc-ca-file; `drsftp serve` and XRootD serve the
certificate."""

from __future__ import annotations

import datetime
import ipaddress
from pathlib import Path

from .xrootd import TLSFiles, hashed_ca_dir

DAYS = 2  # the run's lifetime, and then some


def _pem_key(key) -> bytes:
    from cryptography.hazmat.primitives import serialization

    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def make_certs(d: Path, address: str, *more: str) -> TLSFiles:
    """A CA and one certificate for ``address`` and ``more`` (IP SANs, which
    the clients check; every server of the run serves it) in ``d``; the key
    0600."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    d.mkdir(parents=True, exist_ok=True)
    now = datetime.datetime.now(datetime.UTC)
    start, end = now - datetime.timedelta(hours=1), now + datetime.timedelta(days=DAYS)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "drsftp bench CA")])
    ca = (x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name).public_key(ca_key.public_key())
          .serial_number(x509.random_serial_number()).not_valid_before(start).not_valid_after(end)
          .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
          .add_extension(x509.KeyUsage(digital_signature=True, content_commitment=False, key_encipherment=False,
                                       data_encipherment=False, key_agreement=False, key_cert_sign=True,
                                       crl_sign=True, encipher_only=False, decipher_only=False), critical=True)
          .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
          .sign(ca_key, hashes.SHA256()))
    key = ec.generate_private_key(ec.SECP256R1())
    leaf = (x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, address)]))
            .issuer_name(ca_name).public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(start).not_valid_after(end)
            .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address(a))
                                                        for a in (address, *more)]), critical=False)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
            .sign(ca_key, hashes.SHA256()))
    ca_pem, cert, key_pem = d / "ca.pem", d / "server-cert.pem", d / "server-key.pem"
    ca_pem.write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    cert.write_bytes(leaf.public_bytes(serialization.Encoding.PEM))
    key_pem.touch(0o600)
    key_pem.chmod(0o600)
    key_pem.write_bytes(_pem_key(key))
    return TLSFiles(ca_pem, hashed_ca_dir(ca_pem, d / "ca-dir"), cert, key_pem)
