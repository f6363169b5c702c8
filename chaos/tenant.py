"""A tenant attacking the deployment while the faults run: issue 29's high findings, again.

The run has an API role with one owner token (``TENANT``) and no admin token. From the moment
the traffic starts, the tenant tries what once worked with that token alone:

1. open a Slack, Telegram, Discord or webhook session on somebody else's chat (a session the
   bots would post into as themselves), or a webhook session on the operator's route;
2. point a webhook session at the inside network, in every notation, by ``POST /v1/sessions``
   and by ``PUT …/webhook`` on its one legitimate webhook session (whose receiver the operator
   allowed on 127.0.0.2);
3. read the worker's secrets from the command agent: the run's agent is ``PROBE``, which answers
   like the echo agent and then prints whatever of the worker's environment and files it can
   read, on every turn of every session.

The checks (``chaos/checks.py``, ``tenant_kept_out``) want every attempt refused with a
sentence, nothing of the tenant's stored but its legitimate sessions, and no secret in any
delivered text.
"""

from __future__ import annotations

import os
import secrets
import shlex
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field

import httpx

from chaos.evidence import Attempt

TENANT = "mallory"
# The receiver the operator allows: a loopback address of its own, so that the tenant's
# 127.0.0.1 targets (Redis, the API) stay inside addresses the rule refuses.
ALLOWED_HOST = "127.0.0.2"
# The one chat the operator bound to the tenant (HBGW_OWNER_CHATS): its legitimate webhook.
PARTNER_CHAT = "partner"
VICTIM_CHATS = {"slack": "C0VICTIM", "telegram": "-1001234567", "discord": "123456789012345678"}
READY_TIMEOUT = 120.0  # the API is one more Python process starting on a busy machine
ANSWER_TIMEOUT = 30.0  # one request, the API busy with faults (a Redis restart, a pause)

# Answers like the echo agent ("echo: <first line>", after a pause like its delay), then tries
# the worker's environment, its command line and the run's files. Isolated, each read fails.
PROBE_SCRIPT = (
    'IFS= read -r first; sleep 0.3; printf "echo: %s\\n" "$first"; '
    'for f in /proc/$PPID/environ /proc/$PPID/cmdline; do tr "\\0" "\\n" < "$f"; done '
    "2>/dev/null | grep -a HBGW_; "
    "cat /tmp/chaos-*/password /tmp/chaos-*/*/password /tmp/chaos-*/*/*/password 2>/dev/null; "
    "true"
)
PROBE = shlex.join(["sh", "-c", PROBE_SCRIPT])


def probe_settings() -> dict[str, object]:
    """The run's agent: the probe, as another user where the harness can switch users (root,
    as in CI); elsewhere as the harness's own user, which the worker allows only when told."""
    return {
        "agent": "command",
        "agent_command": PROBE,
        "agent_timeout": 10.0,
        "agent_same_user": os.geteuid() != 0,
    }


@dataclass
class Tenant:
    api_url: str
    token: str
    allowed_url: str  # the receiver the operator allowed: the tenant's one legitimate route
    inside_ports: tuple[int, ...]  # loopback ports of the deployment: Redis, the API
    attempts: list[Attempt] = field(default_factory=list)
    control: str | None = None  # the id of the tenant's legitimate webhook session
    _thread: threading.Thread | None = None

    @staticmethod
    def new_token() -> str:
        return secrets.token_urlsafe(24)

    def api_env(self) -> dict[str, str]:
        """The API role's settings: the tenant's token, its one bound chat, no admin token."""
        return {
            "HBGW_API_TOKENS": f"{TENANT}:{self.token}",
            "HBGW_OWNER_CHATS": f"{TENANT}=webhook:{PARTNER_CHAT}",
        }

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="chaos-tenant", daemon=True)
        self._thread.start()

    def join(self) -> None:
        if self._thread is not None:
            self._thread.join(READY_TIMEOUT + 60 * ANSWER_TIMEOUT)

    def inside_urls(self) -> list[str]:
        """The inside network as a tenant writes it: every notation of loopback, the cloud's
        metadata address, a private and an unspecified one."""
        urls = ["http://169.254.169.254/latest/meta-data/", "http://10.0.0.1/admin"]
        for port in self.inside_ports:
            urls += [
                f"http://127.0.0.1:{port}/",
                f"http://2130706433:{port}/",
                f"http://0x7f.1:{port}/",
                f"http://127.1:{port}/",
                f"http://[::1]:{port}/",
                f"http://[::ffff:127.0.0.1]:{port}/",
                f"http://localhost:{port}/",
                f"http://0.0.0.0:{port}/",
            ]
        return urls

    def _run(self) -> None:
        headers = {"Authorization": f"Bearer {self.token}"}
        with httpx.Client(base_url=self.api_url, headers=headers, timeout=ANSWER_TIMEOUT) as api:
            if not self._ready(api):
                self.attempts.append(Attempt("the API answered", 0, "never ready", False))
                return
            for platform, chat in VICTIM_CHATS.items():
                body = {"platform": platform, "chat": chat}
                self._refused(api, f"{platform} session on {chat}", "POST", "/v1/sessions", body)
            body = {"platform": "webhook", "chat": "victim-partner"}
            self._refused(
                api, "webhook session on the operator's route", "POST", "/v1/sessions", body
            )
            for url in self.inside_urls():
                body = {"platform": "webhook", "chat": "inside", "webhook_url": url}
                self._refused(api, f"webhook session to {url}", "POST", "/v1/sessions", body)
            made = self._send(
                api, "POST", "/v1/sessions",
                {"platform": "webhook", "chat": PARTNER_CHAT, "webhook_url": self.allowed_url},
            )  # fmt: skip
            if made is None or made.status_code != 201:
                answer = "" if made is None else made.text[:300]
                self.attempts.append(
                    Attempt("its own webhook session", _status(made), answer, False)
                )
                return
            self.control = str(made.json()["id"])
            path = f"/v1/sessions/{self.control}/webhook"
            for url in self.inside_urls():
                self._refused(api, f"its webhook moved to {url}", "PUT", path, {"url": url})
            self._refused(
                api, "its webhook moved to the operator's route", "PUT", path, {"url": None}
            )

    def _ready(self, api: httpx.Client) -> bool:
        deadline = time.monotonic() + READY_TIMEOUT
        while time.monotonic() < deadline:
            try:
                if api.get("/healthz").status_code == 200:
                    return True
            except httpx.HTTPError:
                pass
            time.sleep(0.5)
        return False

    def _refused(
        self, api: httpx.Client, name: str, method: str, path: str, body: Mapping[str, object]
    ) -> None:
        answer = self._send(api, method, path, body)
        status = _status(answer)
        sentence = _sentence(answer)
        # Refused: a 403 or a 422 that says why. A 5xx or no answer is no refusal: it may have
        # stored it (and the check reads the store as well).
        refused = status in (403, 422) and bool(sentence)
        self.attempts.append(Attempt(name, status, sentence, refused))

    @staticmethod
    def _send(
        api: httpx.Client, method: str, path: str, body: Mapping[str, object]
    ) -> httpx.Response | None:
        # A fault (Redis restarting, the database away) may answer 503 for a moment: ask again,
        # as a persistent attacker would, until an answer that is not a 503 or the deadline.
        deadline = time.monotonic() + ANSWER_TIMEOUT
        answer: httpx.Response | None = None
        while time.monotonic() < deadline:
            try:
                answer = api.request(method, path, json=body)
            except httpx.HTTPError:
                answer = None
            if answer is not None and answer.status_code != 503:
                return answer
            time.sleep(0.5)
        return answer


def _status(answer: httpx.Response | None) -> int:
    return 0 if answer is None else answer.status_code


def _sentence(answer: httpx.Response | None) -> str:
    if answer is None:
        return ""
    try:
        error = answer.json().get("error") or {}
    except ValueError:
        return answer.text[:300]
    return str(error.get("message") or "")[:300] if isinstance(error, dict) else ""
