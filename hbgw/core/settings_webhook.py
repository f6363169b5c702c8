"""The signed-webhook platform's settings (``HBGW_WEBHOOK_*``), mixed into ``Settings``; the
one check of a webhook URL they share with the API and the store is ``core.webhook_url``."""

from __future__ import annotations

from pydantic import BaseModel, Field, SecretStr, field_validator

from hbgw.core.outbound import Allowlist, parse_allowlist
from hbgw.core.webhook_url import WEBHOOK_URL_CHARS, check_webhook_url, webhook_url_problem

__all__ = ["WEBHOOK_URL_CHARS", "WebhookSettings", "check_webhook_url", "webhook_url_problem"]


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

    webhook_allow_networks: str = Field(
        default="",
        description="Inside addresses outbound webhooks (a session's URL, HBGW_WEBHOOK_URL, "
        "HBGW_ALERT_WEBHOOK) may reach, comma-separated: networks (10.0.5.0/24, fd00::/8), "
        "addresses and host names. Every other loopback, private, link-local, unique-local, "
        "multicast or reserved address is refused.",
    )

    @field_validator("webhook_allow_networks", mode="after")
    @classmethod
    def _allowlist_reads(cls, value: str) -> str:
        parse_allowlist(value)  # a bad entry stops the start with a sentence naming it
        return value

    @property
    def outbound_allowlist(self) -> Allowlist:
        return parse_allowlist(self.webhook_allow_networks)

    @field_validator("webhook_url", mode="after")
    @classmethod
    def _postable_webhook_url(cls, value: str | None) -> str | None:
        return check_webhook_url(value) if value else None

    @property
    def webhook_configured(self) -> bool:
        return self.webhook_secret is not None and bool(self.webhook_secret.get_secret_value())
