"""The Discord platform's ``HBGW_DISCORD_*`` settings, a base of ``core.settings.Settings``.

Apart from the other settings so that ``hbgw/core/settings.py`` stays one screenful per concern; the
fields are ``Settings``' own all the same (``hbgw config``, masking, ``settings_env``).
"""

from __future__ import annotations

import re

from pydantic import BaseModel, Field, SecretStr, field_validator, model_validator

_PUBLIC_KEY = re.compile(r"[0-9a-fA-F]{64}")
_SNOWFLAKE = re.compile(r"[0-9]{1,20}")
DISCORD_TRIO = "HBGW_DISCORD_PUBLIC_KEY, HBGW_DISCORD_BOT_TOKEN and HBGW_DISCORD_APPLICATION_ID"


class DiscordSettings(BaseModel):
    discord_public_key: str | None = Field(
        default=None,
        description="Public key of the Discord application, hex (verifies its interactions).",
    )
    discord_bot_token: SecretStr | None = Field(
        default=None, description="Bot token the Discord channel posts with."
    )
    discord_application_id: str | None = Field(
        default=None, description="Id of the Discord application (its commands, follow-ups)."
    )
    discord_api_url: str = Field(
        default="https://discord.com/api/v10", description="Base URL of Discord's REST API."
    )
    discord_guilds: str = Field(
        default="", description="Discord guild (server) ids accepted, comma-separated; '' any."
    )
    discord_timeout: float = Field(
        default=10.0, gt=0, le=60, description="Seconds one Discord REST request may take."
    )

    @field_validator("discord_public_key", mode="after")
    @classmethod
    def _public_key_is_hex(cls, value: str | None) -> str | None:
        if value is None:
            return None
        if not _PUBLIC_KEY.fullmatch(value.strip()):
            raise ValueError(
                "it must be the application's public key, 64 hexadecimal characters (Developer "
                "Portal → your application → General Information → Public Key)"
            )
        return value.strip().lower()

    @field_validator("discord_application_id", mode="after")
    @classmethod
    def _application_id_is_a_snowflake(cls, value: str | None) -> str | None:
        if value is None:
            return None
        if not _SNOWFLAKE.fullmatch(value.strip()):
            raise ValueError(
                "it must be the application id, digits only (General Information → Application ID)"
            )
        return value.strip()

    @model_validator(mode="after")
    def _discord_comes_whole(self) -> DiscordSettings:
        # The API verifies with the public key and answers commands through the application's
        # webhooks; a worker posts with the token. Part of it would fail at the first message.
        present = [
            v is not None
            for v in (self.discord_public_key, self.discord_bot_token, self.discord_application_id)
        ]
        if any(present) and not all(present):
            raise ValueError(
                f"set {DISCORD_TRIO} together (Discord is served only with all three), or none"
            )
        return self

    @property
    def discord_configured(self) -> bool:
        return (
            self.discord_public_key is not None
            and self.discord_bot_token is not None
            and self.discord_application_id is not None
        )

    @property
    def discord_guild_ids(self) -> frozenset[str]:
        return frozenset(g.strip() for g in self.discord_guilds.split(",") if g.strip())
