"""Test certificates made with the `cryptography` package: a CA and
server certificates signed by it (good, expired, for another name)."""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID


@dataclass
class Certs:
    ca: Path  # the CA certificate (what --ca-file names)
    good: Path  # cert + key for localhost / 127.0.0.1
    expired: Path
    wrong_name: Path  # valid, but for other.example only
    other_ca: Path  # a CA that signed none of them
    self_signed: Path  # cert + key, its own CA, for localhost / 127.0.0.1
    self_signed_cert: Path  # the same certificate alone (what a client's --ca-file names)


def _pem_key(key) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def _ca(name: str):
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = datetime.datetime.now(datetime.UTC)
    cert = (x509.CertificateBuilder().subject_name(subject).issuer_name(subject)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(days=1)).not_valid_after(now + datetime.timedelta(days=30))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(x509.KeyUsage(digital_signature=True, content_commitment=False, key_encipherment=False,
                                         data_encipherment=False, key_agreement=False, key_cert_sign=True,
                                         crl_sign=True, encipher_only=False, decipher_only=False), critical=True)
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
            .sign(key, hashes.SHA256()))
    return cert, key


def _leaf(ca_cert, ca_key, names: list[str], ips: list[str], *, days_from: int, days_to: int):
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC)
    sans = [x509.DNSName(n) for n in names] + [x509.IPAddress(ipaddress.ip_address(i)) for i in ips]
    cert = (x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, names[0])]))
            .issuer_name(ca_cert.subject).public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now + datetime.timedelta(days=days_from))
            .not_valid_after(now + datetime.timedelta(days=days_to))
            .add_extension(x509.SubjectAlternativeName(sans), critical=False)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
            .sign(ca_key, hashes.SHA256()))
    return cert.public_bytes(serialization.Encoding.PEM) + _pem_key(key)


def _self_signed():
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    now = datetime.datetime.now(datetime.UTC)
    sans = [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(days=1)).not_valid_after(now + datetime.timedelta(days=30))
            .add_extension(x509.SubjectAlternativeName(sans), critical=False)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(key, hashes.SHA256()))
    return cert.public_bytes(serialization.Encoding.PEM), _pem_key(key)


def make_certs(d: Path, ips: tuple[str, ...] = ()) -> Certs:
    """``ips``: more addresses the good certificate is valid for (an
    emulated link's server address)."""
    d.mkdir(parents=True, exist_ok=True)
    ca_cert, ca_key = _ca("drsftp test CA")
    other_cert, _ = _ca("drsftp other CA")
    ss_cert, ss_key = _self_signed()
    files = {
        "ca.pem": ca_cert.public_bytes(serialization.Encoding.PEM),
        "other-ca.pem": other_cert.public_bytes(serialization.Encoding.PEM),
        "good.pem": _leaf(ca_cert, ca_key, ["localhost"], ["127.0.0.1", *ips], days_from=-1, days_to=30),
        "expired.pem": _leaf(ca_cert, ca_key, ["localhost"], ["127.0.0.1"], days_from=-30, days_to=-1),
        "wrong-name.pem": _leaf(ca_cert, ca_key, ["other.example"], [], days_from=-1, days_to=30),
        "self-signed.pem": ss_cert + ss_key,
        "cert.pem": ss_cert,
    }
    for name, data in files.items():
        (d / name).write_bytes(data)
    return Certs(d / "ca.pem", d / "good.pem", d / "expired.pem", d / "wrong-name.pem", d / "other-ca.pem",
                 d / "self-signed.pem", d / "cert.pem")
