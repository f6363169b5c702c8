"""What a verified webhook message does: it reaches the session of its chat and thread (made
on its first message), as a user message for a turn or a /heartbeat command answered at once.

The body (JSON, docs/platforms.md, Signed webhooks)::

    {"id": "<the sender's message id>", "chat": "...", "thread": "..." | null,
     "text": "...", "owner": "..."}

``id`` de-duplicates the sender's retries, within its owner, chat and thread (``seen_id``);
``thread`` and ``owner`` may be left out (owner: ``webhook``). Everything here runs after the
signature and the replay window have passed (``routes.py``), on the API's store, Runtime and
clock — the path of ``POST /v1/sessions/{id}/messages`` (``ApiContext.receive``).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

from hbgw.core.errors import BadInput, QuotaExceeded
from hbgw.gateway.api.context import ApiContext
from hbgw.gateway.api.errors import command_error_code
from hbgw.gateway.api.quotas import check_message_rate
from hbgw.gateway.inbound import Answered
from hbgw.sessions.grammar import is_cron_command, is_heartbeat_command

PLATFORM = "webhook"
DEFAULT_OWNER = "webhook"
MAX_ID_CHARS = 200  # the sender's id, inside an idempotency key of 255
FIELDS = frozenset({"id", "chat", "thread", "text", "owner"})


class NotAMessage(ValueError):
    """The body is signed but not a webhook message; the text says what to change."""


@dataclass(frozen=True)
class WebhookMessage:
    id: str
    chat: str
    thread: str | None
    text: str
    owner: str

    @property
    def idempotency_key(self) -> str:
        return f"webhook:{self.id}"

    @property
    def seen_id(self) -> str:
        """What the sender's retry is recognised by: its id within its owner, chat and thread
        (two owners, or two chats of one, may well use the same ids); a digest, so the Redis
        key stays short whatever the names."""
        route = "\x1f".join((self.owner, self.chat, self.thread or "", self.id))
        return hashlib.sha256(route.encode()).hexdigest()[:32]


def read_message(payload: Any) -> WebhookMessage:
    """The message in a parsed body, or ``NotAMessage`` naming the field that is wrong."""
    if not isinstance(payload, dict):
        raise NotAMessage("The body must be a JSON object with id, chat and text.")
    unknown = sorted(set(payload) - FIELDS)
    if unknown:
        raise NotAMessage(
            f"Unknown field {unknown[0]!r}; a webhook message has id, chat, thread, text, owner."
        )
    sender_id = _text(payload, "id", required=True)
    assert sender_id is not None
    if len(sender_id) > MAX_ID_CHARS:
        raise NotAMessage(f"'id' is longer than {MAX_ID_CHARS} characters.")
    chat, text = _text(payload, "chat", required=True), _text(payload, "text", required=True)
    assert chat is not None and text is not None
    thread = _text(payload, "thread", required=False)
    owner = _text(payload, "owner", required=False) or DEFAULT_OWNER
    return WebhookMessage(sender_id, chat, thread, text, owner)


def _command_failed(
    ctx: ApiContext, session_id: str | None, exc: BadInput
) -> tuple[int, dict[str, Any]]:
    """A command's error is its answer (200): the sentence as the reply, and as the error."""
    ctx.metrics.commands.labels("false").inc()
    code = command_error_code(exc)
    failed = {"kind": "command", "session_id": session_id, "ok": False, "reply": str(exc)}
    return 200, {**failed, "error": {"code": code, "message": str(exc)}}


def _text(payload: dict[str, Any], name: str, *, required: bool) -> str | None:
    value = payload.get(name)
    if value is None and not required:
        return None
    if not isinstance(value, str) or not value.strip():
        need = "is required: a non-empty string" if required else "must be a non-empty string"
        raise NotAMessage(f"'{name}' {need}.")
    return value


def take_message(ctx: ApiContext, message: WebhookMessage) -> tuple[int, dict[str, Any]]:
    """Store the message (a turn follows) or apply its command; the status and JSON answer."""
    command = is_heartbeat_command(message.text) or is_cron_command(message.text)
    try:
        session = ctx.store.sessions.session_at(
            platform=PLATFORM,
            chat=message.chat,
            thread=message.thread,
            now=ctx.clock(),
            owner=message.owner,
        )
    except QuotaExceeded as exc:  # a new chat beyond the owner's sessions
        if not command:
            raise  # 429 with its sentence, nothing stored
        return _command_failed(ctx, None, exc)
    assert session is not None  # create=True
    check_message_rate(ctx.redis, session.id, ctx.settings.api_messages_per_minute)
    try:
        result = ctx.receive(session.id, message.text, idempotency_key=message.idempotency_key)
    except BadInput as exc:
        if not command:
            raise  # 422 (429 for a quota) with its sentence, nothing stored
        return _command_failed(ctx, session.id, exc)
    if isinstance(result, Answered):
        ctx.metrics.commands.labels("true").inc()
        return 200, {
            "kind": "command", "session_id": result.session_id, "ok": True, "reply": result.text,
        }  # fmt: skip
    if not result.duplicate:
        ctx.metrics.messages.inc()
    return 202, {
        "kind": "message",
        "session_id": result.session_id,
        "message_id": ctx.ids.show(result.message_id),
        "duplicate": result.duplicate,
        "handed_off": result.handed_off,
    }
