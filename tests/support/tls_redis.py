"""TLS for Redis tests: a CA and certificates made here, a real TLS redis-server with AUTH, and an
impostor that presents a certificate of another CA and records every byte it is sent.

The impostor stands for a man in the middle: a client that verifies aborts the handshake, so
the impostor receives no application data, ``AUTH`` and its password included.
"""

from __future__ import annotations

import socket
import ssl
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path

import redis

HOST = "127.0.0.1"
PASSWORD = "tls-test-secret-5b1e"


@dataclass(frozen=True)
class Pki:
    ca: Path
    cert: Path
    key: Path


def _openssl(*args: str | Path) -> None:
    subprocess.run(["openssl", *map(str, args)], check=True, capture_output=True, timeout=60)


def make_pki(directory: Path, label: str) -> Pki:
    """A CA and a server certificate for 127.0.0.1 and localhost, signed by it (openssl CLI)."""
    directory.mkdir(parents=True, exist_ok=True)
    pki = Pki(directory / "ca.pem", directory / "server.pem", directory / "server.key")
    ca_key, csr, ext = directory / "ca.key", directory / "server.csr", directory / "san.ext"
    curve = ("-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes")
    _openssl("req", "-x509", *curve, "-keyout", ca_key, "-out", pki.ca, "-days", "1",
             "-subj", f"/CN={label} CA")  # fmt: skip
    _openssl("req", "-new", *curve, "-keyout", pki.key, "-out", csr, "-subj", "/CN=redis")
    ext.write_text(f"subjectAltName=IP:{HOST},DNS:localhost\n")
    _openssl("x509", "-req", "-in", csr, "-CA", pki.ca, "-CAkey", ca_key, "-CAcreateserial",
             "-out", pki.cert, "-days", "1", "-extfile", ext)  # fmt: skip
    return pki


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind((HOST, 0))
        port: int = sock.getsockname()[1]
        return port


@contextmanager
def tls_redis_server(directory: Path, pki: Pki) -> Iterator[str]:
    """A redis-server that speaks only TLS and wants AUTH; yields its ``rediss://`` URL."""
    port = free_port()
    argv = [
        "redis-server", "--port", "0", "--tls-port", str(port), "--bind", HOST,
        "--tls-cert-file", str(pki.cert), "--tls-key-file", str(pki.key),
        "--tls-ca-cert-file", str(pki.ca), "--tls-auth-clients", "no",
        "--requirepass", PASSWORD, "--dir", str(directory), "--save", "", "--appendonly", "no",
    ]  # fmt: skip
    url = f"rediss://:{PASSWORD}@{HOST}:{port}/0"
    with (directory / "redis.log").open("ab") as log:
        process = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT)
    try:
        _wait_answering(url, pki, process)
        yield url
    finally:
        process.terminate()
        process.wait(10)


def _wait_answering(url: str, pki: Pki, process: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 15
    client = redis.Redis.from_url(url, ssl_ca_certs=str(pki.ca), socket_timeout=2)
    try:
        while True:
            with suppress(redis.RedisError, OSError):
                if client.ping():
                    return
            if process.poll() is not None or time.monotonic() > deadline:
                raise AssertionError("the TLS redis-server did not start (see redis.log)")
            time.sleep(0.02)
    finally:
        client.close()


class Impostor:
    """A TLS server on loopback with a certificate of another CA; keeps what clients send."""

    def __init__(self, pki: Pki) -> None:
        self._context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self._context.load_cert_chain(pki.cert, pki.key)
        self._listener = socket.create_server((HOST, 0))
        self._listener.settimeout(0.2)
        self.port: int = self._listener.getsockname()[1]
        self.received = bytearray()
        self.handshakes = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)

    def url(self, password: str = PASSWORD) -> str:
        return f"rediss://:{password}@{HOST}:{self.port}/0"

    def __enter__(self) -> Impostor:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(5)
        self._listener.close()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                raw, _ = self._listener.accept()
            except TimeoutError:
                continue
            threading.Thread(target=self._talk, args=(raw,), daemon=True).start()

    def _talk(self, raw: socket.socket) -> None:
        # A client that does not verify completes the handshake and sends AUTH: keep it, and
        # answer +OK to anything so such a client goes on talking.
        raw.settimeout(5)
        try:
            with suppress(OSError), self._context.wrap_socket(raw, server_side=True) as conn:
                self.handshakes += 1
                while data := conn.recv(65536):
                    self.received += data
                    conn.sendall(b"+OK\r\n")
        finally:
            raw.close()
