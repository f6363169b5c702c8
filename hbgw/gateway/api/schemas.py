"""Request and response models. Requests reject unknown fields; responses allow extra ones, so
fields a view gains later (token usage on runs and messages) appear without a change here."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field


class Request(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Response(BaseModel):
    model_config = ConfigDict(extra="allow")


class NewSession(Request):
    platform: str
    chat: str
    thread: str | None = None
    owner: str | None = None
    """Admin token only: the owner of the new session."""
    webhook_url: str | None = None
    """A webhook session's own URL (``PUT …/webhook`` changes it); an owner token's webhook
    session needs one: HBGW_WEBHOOK_URL is the operator's partner route."""


class NewMessage(Request):
    text: str


class HeartbeatSpec(Request):
    schedule: str
    """As after /heartbeat: ``every 15m``, ``15m``, ``cron 0 9 * * 1-5``, ``@daily --tz UTC``
    (policy words included, or given in the fields below; docs/contract.md "Policies")."""
    prompt: str
    active_hours: str | None = Field(default=None, max_length=11)
    """``09:00-18:00``; crosses midnight when the end is earlier (``22:00-06:00``)."""
    tz: str | None = Field(default=None, max_length=64)
    """IANA zone of the active hours (and of a cron schedule)."""
    weekdays: bool = False
    exact: bool = False
    """No jitter: fire on the exact due times."""
    lasts: str | None = Field(default=None, alias="for", max_length=16)
    """``7d``: the heartbeat ends that long after it is set."""
    times: int | None = Field(default=None, ge=1, le=1_000_000)
    budget: int | str | None = None
    """Tokens per UTC day (``50000`` or ``"50k"``); when spent the heartbeat pauses."""
    model: str | None = Field(default=None, max_length=128)
    """Its turns' model, one of HBGW_ALLOWED_MODELS."""
    dedupe: str | None = Field(default=None, max_length=16)
    """``6h``: a reply repeated on its route within that window is held back; ``0``: off."""
    backoff: str | None = Field(default=None, max_length=16)
    """``4h``: quiet fires double the interval up to that ceiling."""


class OwnerBudgetSpec(Request):
    daily_tokens: int | str = Field(union_mode="left_to_right")
    """An owner's default budget per UTC day: ``50000`` or ``"50k"``."""


class JobSpec(Request):
    """A cron job: ``schedule`` as for ``hbgw cron add`` (``in 10m``, ``at <ISO 8601>``,
    ``every 2h``, five cron fields, ``@daily``); the target is ``session_id`` or the route
    ``platform``/``chat``/``thread`` (a fresh session per run)."""

    schedule: str
    prompt: str
    session_id: str | None = None
    platform: str | None = None
    chat: str | None = None
    thread: str | None = None
    times: int | None = Field(default=None, ge=1, le=1_000_000)
    model: str | None = None
    tz: str | None = None
    missed: str = "coalesce"
    exact: bool = False
    """No jitter: run on the exact due times (also a last word ``exact`` in ``schedule``)."""


class ErrorDetail(BaseModel):
    code: str
    message: str
    # A 5xx only: the log line holding the failure's detail carries the same reference.
    reference: str | None = None


class ErrorBody(BaseModel):
    error: ErrorDetail


class Session(Response):
    id: str
    session_id: str
    platform: str
    chat: str
    thread: str | None
    owner: str | None
    status: str
    closed_reason: str | None
    parent_id: str | None
    created_at: str | None


class SessionDetail(Session):
    active_id: str


class SessionList(Response):
    sessions: list[Session]
    next_after: str | None


class SessionChange(Response):
    session: Session
    reply: str


class Message(Response):
    id: int
    session_id: str
    role: str
    kind: str
    text: str
    fire_id: str | None
    reply_to: int | None
    state: str
    created_at: str | None
    heartbeat: bool
    # A heartbeat answer that was the silence marker: on record, never sent to the chat.
    silent: bool = False
    # Tokens the model spent on this reply (user turns; a heartbeat's are on its run).
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    model: str | None = None


class MessageList(Response):
    messages: list[Message]
    next_after: int | None


class CommandAnswer(Response):
    kind: Literal["command"]
    session_id: str
    ok: bool
    reply: str
    error: ErrorDetail | None = None


class MessageAccepted(Response):
    kind: Literal["message"]
    session_id: str
    message_id: int
    duplicate: bool
    handed_off: bool


class HeartbeatStatus(Response):
    session_id: str
    status: str
    prompt: str | None
    schedule: str | None
    next_due_at: str | None
    # Due now; waiting_for_idle: and held back by a running turn or queued messages (null
    # fields never: false when Redis does not answer).
    due_now: bool = False
    waiting_for_idle: bool = False
    fire_count: int
    # Set when the gateway paused it because its chat refused a message for good.
    paused_reason: str | None = None
    active_hours: str | None = None
    active_hours_tz: str | None = None
    weekdays: bool = False
    outside_active_hours: bool = False
    exact: bool = False
    ends_at: str | None = None
    times: int | None = None
    daily_tokens: int | None = None
    model: str | None = None
    # What its runs spent on the UTC day of the request.
    tokens_today: int = 0
    dedupe_seconds: int = 0
    backoff_seconds: int | None = None
    backing_off: bool = False
    interval_now_seconds: int | None = None


class HeartbeatChange(Response):
    reply: str
    heartbeat: HeartbeatStatus


class Reply(Response):
    reply: str


class Delivery(Response):
    """How one outbound message's delivery stands: ``pending`` (about to leave), ``sent``,
    ``failed`` (``error`` says why), ``suppressed`` (nothing to say, or the platform dropped a
    repeat), ``unknown`` (its turn was cut off between the send and the record) or
    ``retrying`` (the platform failed for now; sent again at ``next_attempt_at``). ``outcome``
    says the same for people: ``delivered`` for ``sent``."""

    channel: str
    kind: str
    state: str
    outcome: str | None = None
    next_attempt_at: str | None = None
    attempts: int
    platform_message_id: str | None = None
    error: str | None = None
    updated_at: str | None = None


class Run(Response):
    id: int
    fire_id: str
    session_id: str
    state: str
    # Heartbeats cost money: what the model spent on this fire.
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    model: str | None = None
    # Null for a run that never reached its send (refunded, failed before delivery).
    delivery: Delivery | None = None


class RunList(Response):
    runs: list[Run]
    next_before: int | None = None


class Health(Response):
    status: str


class Readiness(Response):
    status: str
    checks: dict[str, str] | None = None
    """The admin token's answer only: each check's sentence."""


def errors(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI entries for the error answers a route may give (401 and 422 on every route)."""
    described = {
        401: "No token, or an unknown one.",
        403: "An owner token may not open a session on this chat (not bound in "
        "HBGW_OWNER_CHATS): it starts from a message in the chat, or with the admin token.",
        404: "No such session (or another owner's).",
        409: "The session's state does not allow it.",
        413: "The request body is too large.",
        422: "Invalid input.",
        429: "A quota or the message rate is exceeded (Retry-After says when to try again).",
        503: "The database or Redis is not reachable.",
    }
    wanted = sorted({401, 413, 422, 503, *statuses})
    return {s: {"model": ErrorBody, "description": described[s]} for s in wanted}
