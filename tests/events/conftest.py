"""Events fixtures: a real HTTPS receiver (a TLS server on 127.0.0.1 with a certificate from a
throwaway CA made for the test session; GuideDesk trusts it through EVENTS_CA_BUNDLE) that
records every request and answers what the test tells it to."""

from __future__ import annotations

import datetime as dt
import ipaddress
import json
import ssl
import threading
from collections.abc import Iterator
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from tests.support.http_handler import QuietHandler


def _name(common: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common)])


def make_ca_and_server_cert(folder: Path) -> tuple[Path, Path, Path]:
    """(CA bundle, server certificate, server key) PEM files for 127.0.0.1."""
    now = dt.datetime.now(dt.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_cert = (
        x509.CertificateBuilder()
        .subject_name(_name("GuideDesk test CA"))
        .issuer_name(_name("GuideDesk test CA"))
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(days=1))
        .not_valid_after(now + dt.timedelta(days=2))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(
            x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False
        )
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name("127.0.0.1"))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(days=1))
        .not_valid_after(now + dt.timedelta(days=2))
        .add_extension(
            x509.SubjectAlternativeName(
                [x509.IPAddress(ipaddress.ip_address("127.0.0.1")), x509.DNSName("localhost")]
            ),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()),
            critical=False,
        )
        .sign(ca_key, hashes.SHA256())
    )
    bundle, cert_file, key_file = folder / "ca.pem", folder / "cert.pem", folder / "key.pem"
    bundle.write_bytes(ca_cert.public_bytes(serialization.Encoding.PEM))
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return bundle, cert_file, key_file


class Receiver:
    """The business's HTTPS endpoint. `answers` is a list of statuses to give, in order (then
    200); `down()` stops it listening, `up()` starts it again on the same port."""

    def __init__(self, cert: Path, key: Path) -> None:
        self.context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        self.context.load_cert_chain(cert, key)
        self.requests: list[dict[str, Any]] = []
        self.answers: list[int] = []
        self.port = 0
        self.server: ThreadingHTTPServer | None = None
        self.up()

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}/hook"

    def up(self) -> None:
        receiver = self

        class Handler(QuietHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                receiver.requests.append({"headers": dict(self.headers), "body": body})
                status = receiver.answers.pop(0) if receiver.answers else 200
                self.answer_json(status, {"ok": status < 300, "result": {}})

        server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        server.socket = self.context.wrap_socket(server.socket, server_side=True)
        self.port = server.server_address[1]
        self.server = server
        threading.Thread(target=server.serve_forever, daemon=True).start()

    def down(self) -> None:
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()
            self.server = None

    def bodies(self) -> list[dict[str, Any]]:
        return [json.loads(r["body"]) for r in self.requests]


@pytest.fixture(scope="session")
def tls_files(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    return make_ca_and_server_cert(tmp_path_factory.mktemp("events-tls"))


@pytest.fixture
def receiver(tls_files: tuple[Path, Path, Path], settings: Any) -> Iterator[Receiver]:
    bundle, cert, key = tls_files
    settings.EVENTS_CA_BUNDLE = str(bundle)
    settings.EVENTS_TIMEOUT_SECONDS = 3.0
    server = Receiver(cert, key)
    yield server
    server.down()
