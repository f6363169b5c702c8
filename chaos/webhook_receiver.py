"""The chaos run's webhook receiver: where the sessions on platform ``webhook`` are delivered.

It is another gateway as the webhook channel meets one in the wild: some requests fail (500,
nothing taken) and some hang past the channel's timeout (taken, then answered too late, so the
sender cannot know). It de-duplicates by Idempotency-Key, as the scheme asks receivers to: a key
taken before is answered ``{"duplicate": true}`` and not taken again. Every request is recorded
with its key, its repeat mark, whether its signature verified (with the gateway's own check)
and whether it was taken; the checks (``webhook_checks.py``) read the records.

Standard library only (``ThreadingHTTPServer`` on a loopback port the kernel picks), in a thread
of the harness: a hung answer holds its own handler thread, never the others.
"""

from __future__ import annotations

import json
import random
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from chaos.evidence import WebhookHit
from hbgw.gateway.platforms.webhook.signature import problem

FAIL_RATE = 0.12  # requests answered 500 (not taken)
HANG_RATE = 0.06  # requests taken, then answered after the channel's timeout
MAX_BODY = 1 << 20


class ChaosReceiver:
    def __init__(self, secret: str, seed: int, hang_for: float, host: str = "127.0.0.1") -> None:
        self.secret = secret
        self.hang_for = hang_for
        self.rng = random.Random(seed)
        self.lock = threading.Lock()
        self.hits: list[WebhookHit] = []
        self.taken: set[str] = set()
        self.server = ThreadingHTTPServer((host, 0), _handler(self))
        self.server.daemon_threads = True
        self.thread = threading.Thread(
            target=self.server.serve_forever, name="chaos-webhook", daemon=True
        )

    @property
    def url(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host!s}:{port}/hooks/chaos"

    def start(self) -> None:
        self.thread.start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def records(self) -> list[WebhookHit]:
        with self.lock:
            return list(self.hits)

    def take(self, headers: dict[str, str], body: bytes) -> tuple[int, dict[str, Any], bool]:
        """The answer to one request (status, JSON, whether to hang first), recorded."""
        signed = problem(self.secret, headers, body, time.time()) is None
        try:
            payload = json.loads(body)
        except ValueError:
            payload = {}
        payload = payload if isinstance(payload, dict) else {}
        key = headers.get("idempotency-key")
        with self.lock:
            draw = self.rng.random()
            fail = signed and draw < FAIL_RATE
            hang = signed and not fail and draw < FAIL_RATE + HANG_RATE
            status = 401 if not signed else 500 if fail else 200
            taken = status == 200 and key is not None and key not in self.taken
            if taken and key is not None:
                self.taken.add(key)
            self.hits.append(_hit(headers, payload, key, signed, status, taken, hang))
        if status != 200:
            return status, {"error": "signature" if not signed else "chaos says no"}, False
        return 200, ({"id": key} if taken else {"duplicate": True}), hang


def _hit(
    headers: dict[str, str],
    payload: dict[str, Any],
    key: str | None,
    signed: bool,
    status: int,
    taken: bool,
    hang: bool,
) -> WebhookHit:
    def text(name: str) -> str | None:
        value = payload.get(name)
        return value if isinstance(value, str) else None

    return WebhookHit(
        at=time.time(),
        key=key,
        repeat=headers.get("x-hbgw-possible-repeat") == "1",
        signed=signed,
        status=status,
        taken=taken,
        hung=hang,
        session=text("session_id"),
        kind=text("kind"),
        ref=text("ref"),
        reply_to=text("reply_to"),
        delivery_key=text("delivery_key"),
    )


def _handler(receiver: ChaosReceiver) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # the name http.server calls
            length = min(int(self.headers.get("content-length") or 0), MAX_BODY)
            body = self.rfile.read(length)
            headers = {k.lower(): v for k, v in self.headers.items()}
            status, answer, hang = receiver.take(headers, body)
            if hang:
                time.sleep(receiver.hang_for)
            out = json.dumps(answer).encode()
            try:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(out)))
                self.end_headers()
                self.wfile.write(out)
            except OSError:
                pass  # the sender gave up on a hung answer

        def log_message(self, format: str, *args: Any) -> None:
            return None  # the records are the log

    return Handler
