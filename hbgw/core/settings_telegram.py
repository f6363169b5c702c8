"""The Telegram settings (``HBGW_TELEGRAM_*``), a part of ``Settings`` kept in a module of its
own so that each platform's fields and checks sit together and ``settings.py`` stays readable.

``Settings`` inherits them: they are read from the environment, starred by ``masked()`` and by
every log line (the two tokens are ``SecretStr``), and spelled out for child processes like any
other setting.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from pydantic import BaseModel, Field, SecretStr, field_validator, model_validator

# What Telegram's setWebhook accepts as secret_token; anything else it refuses.
_SECRET = re.compile(r"[A-Za-z0-9_-]{1,256}")
_CHAT_ID = re.compile(r"-?[0-9]{1,20}")


class TelegramSettings(BaseModel):
    telegram_bot_token: SecretStr | None = Field(
        default=None, description="Bot token from BotFather (123456:ABC-...) the bot calls with."
    )
    telegram_secret_token: SecretStr | None = Field(
        default=None,
        description="Secret Telegram sends in X-Telegram-Bot-Api-Secret-Token (1-256 of "
        "A-Z a-z 0-9 _ -); `hbgw telegram set-webhook` registers it.",
    )
    telegram_api_url: str = Field(
        default="https://api.telegram.org", description="Base URL of Telegram's Bot API."
    )
    telegram_chats: str = Field(
        default="", description="Telegram chat ids accepted, comma-separated; '' any."
    )
    telegram_timeout: float = Field(
        default=10.0, gt=0, le=60, description="Seconds one Telegram Bot API request may take."
    )

    if TYPE_CHECKING:  # defined by Settings, which this is a part of

        @property
        def platform_names(self) -> frozenset[str] | None: ...

    @field_validator("telegram_secret_token", mode="after")
    @classmethod
    def _secret_charset(cls, value: SecretStr | None) -> SecretStr | None:
        # Telegram's setWebhook refuses any other secret: say so at start, not at set-webhook.
        if value is not None and not _SECRET.fullmatch(value.get_secret_value()):
            raise ValueError(
                "use 1-256 characters of A-Z, a-z, 0-9, _ and - (Telegram accepts no other), "
                "for example the output of openssl rand -hex 32"
            )
        return value

    @field_validator("telegram_api_url", mode="after")
    @classmethod
    def _no_trailing_slash(cls, value: str) -> str:
        return value.rstrip("/")  # methods are <url>/bot<token>/<method>

    @field_validator("telegram_chats", mode="after")
    @classmethod
    def _chat_ids(cls, value: str) -> str:
        ids = [part.strip() for part in value.split(",") if part.strip()]
        wrong = [part for part in ids if not _CHAT_ID.fullmatch(part)]
        if wrong:
            raise ValueError(
                f"list chat ids, whole numbers like -1001234567890 ({', '.join(wrong)} is not one)"
            )
        return ",".join(ids)

    @model_validator(mode="after")
    def _telegram_needs_both_secrets(self) -> TelegramSettings:
        # The API checks each update with the secret token and answers with the bot token; a
        # worker sends with the bot token. Half a configuration would fail at the first update.
        if (self.telegram_bot_token is None) != (self.telegram_secret_token is None):
            raise ValueError(
                "set HBGW_TELEGRAM_BOT_TOKEN and HBGW_TELEGRAM_SECRET_TOKEN together (Telegram "
                "is served only with both), or neither"
            )
        return self

    @property
    def telegram_configured(self) -> bool:
        return self.telegram_bot_token is not None and self.telegram_secret_token is not None

    @property
    def telegram_chat_ids(self) -> frozenset[str]:
        return frozenset(c for c in self.telegram_chats.split(",") if c)
