"""Test certificates for the TLS lab: a CA, and leaf certificates it signs (cryptography), as
PEM files for Python's ssl and the Kafka clients, and as keytool stores for a Java broker.

    ca = CertificateAuthority(tmp_path)
    server = ca.issue("proxy", ["localhost", "127.0.0.1"])   # .cert, .key: PEM paths
    keystore, truststore = ca.java_stores(server, "changeit")  # PKCS12 key store, keytool trust store
"""

from __future__ import annotations

import datetime
import ipaddress
import subprocess
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.serialization import pkcs12
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID


@dataclass
class Issued:
    name: str
    cert: Path
    key: Path
    certificate: x509.Certificate
    private_key: ec.EllipticCurvePrivateKey


def _name(common: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common)])


class CertificateAuthority:
    def __init__(self, directory: Path, name: str = "kinspect lab CA"):
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.timezone.utc)
        self.certificate = (
            x509.CertificateBuilder().subject_name(_name(name)).issuer_name(_name(name))
            .public_key(self.key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(days=1)).not_valid_after(now + datetime.timedelta(days=30))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                         content_commitment=False, key_encipherment=False, data_encipherment=False,
                                         key_agreement=False, encipher_only=False, decipher_only=False), critical=True)
            .sign(self.key, hashes.SHA256()))
        self.cert = self.directory / "ca.pem"
        self.cert.write_bytes(self.certificate.public_bytes(serialization.Encoding.PEM))

    def issue(self, name: str, hosts: list[str]) -> Issued:
        """A certificate for servers and clients alike, valid for ``hosts`` (names or IPs)."""
        key = ec.generate_private_key(ec.SECP256R1())
        names = []
        for host in hosts:
            try:
                names.append(x509.IPAddress(ipaddress.ip_address(host)))
            except ValueError:
                names.append(x509.DNSName(host))
        now = datetime.datetime.now(datetime.timezone.utc)
        certificate = (
            x509.CertificateBuilder().subject_name(_name(name)).issuer_name(self.certificate.subject)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(days=1)).not_valid_after(now + datetime.timedelta(days=30))
            .add_extension(x509.SubjectAlternativeName(names), critical=False)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]),
                           critical=False)
            .sign(self.key, hashes.SHA256()))
        cert_path, key_path = self.directory / f"{name}.pem", self.directory / f"{name}.key"
        cert_path.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
        key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                               serialization.NoEncryption()))
        return Issued(name, cert_path, key_path, certificate, key)

    def java_stores(self, issued: Issued, password: str) -> tuple[Path, Path]:
        """A PKCS12 key store with ``issued``'s key and chain, and a trust store of this CA made
        by keytool (a trusted-certificate entry, as Java wants)."""
        keystore = self.directory / f"{issued.name}.keystore.p12"
        keystore.write_bytes(pkcs12.serialize_key_and_certificates(
            issued.name.encode(), issued.private_key, issued.certificate, [self.certificate],
            serialization.BestAvailableEncryption(password.encode())))
        truststore = self.directory / "truststore.p12"
        if not truststore.exists():
            subprocess.run(["keytool", "-importcert", "-noprompt", "-alias", "lab-ca", "-file", str(self.cert),
                            "-keystore", str(truststore), "-storetype", "PKCS12", "-storepass", password],
                           check=True, capture_output=True, timeout=120)
        return keystore, truststore

    def broker_stores(self, password: str) -> tuple[Path, Path]:
        """java_stores of a "broker" certificate for a lab broker on loopback (localhost, 127.0.0.1)."""
        return self.java_stores(self.issue("broker", ["localhost", "127.0.0.1"]), password)
