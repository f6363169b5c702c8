"""The signed-webhook platform's settings (``HBGW_WEBHOOK_*``), mixed into ``Settings``, and
the one check of a webhook URL that the settings, the API and the store share."""

from __future__ import annotations

from urllib.parse import urlsplit

from pydantic import BaseModel, Field, SecretStr, field_validator

# A URL as kept on a session: long enough for a token in its path or query.
WEBHOOK_URL_CHARS = 2048


def webhook_url_problem(url: str) -> str | None:
    """None when ``url`` can be POSTed to; otherwise the sentence that says what to change."""
    if not url or len(url) > WEBHOOK_URL_CHARS:
        return f"A webhook URL must be 1 to {WEBHOOK_URL_CHARS} characters long."
    if any(c.isspace() or ord(c) < 32 for c in url):
        return "A webhook URL must not contain spaces or control characters."
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - a port out of range raises here
    except ValueError:
        return "The webhook URL is not a URL; use https://HOST/PATH."
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return "A webhook URL must be http:// or https:// with a host, like https://HOST/PATH."
    if parts.fragment:
        return "A webhook URL must not have a #fragment (it is never sent to the server)."
    return None


def check_webhook_url(url: str) -> str:
    """``url`` if it can be POSTed to; else ``ValueError`` with the sentence."""
    problem = webhook_url_problem(url)
    if problem is not None:
        raise ValueError(problem)
    return url


class WebhookSettings(BaseModel):
    """Signed webhooks (docs/platforms.md, Signed webhooks); served when the secret is set."""

    webhook_secret: SecretStr | None = Field(
        default=None,
        description="Shared secret of signed webhooks: verifies inbound requests (HMAC-SHA256) "
        "and signs every outbound POST.",
    )
    webhook_url: str | None = Field(
        default=None,
        description="URL every webhook session's replies are POSTed to when the session names "
        "none of its own (PUT /v1/sessions/{id}/webhook).",
    )
    webhook_timeout: float = Field(
        default=10.0, gt=0, le=120, description="Seconds one outbound webhook POST may take."
    )
    webhook_retries: int = Field(
        default=4, ge=0, le=20, description="Outbound POSTs repeated on 429, 5xx or a timeout."
    )
    webhook_retry_seconds: float = Field(
        default=30.0,
        gt=0,
        le=600,
        description="Most seconds one outbound webhook delivery takes, its retries included.",
    )

    @field_validator("webhook_url", mode="after")
    @classmethod
    def _postable_webhook_url(cls, value: str | None) -> str | None:
        return check_webhook_url(value) if value else None

    @property
    def webhook_configured(self) -> bool:
        return self.webhook_secret is not None and bool(self.webhook_secret.get_secret_value())
