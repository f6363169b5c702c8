"""compose and Helm pass an optional setting nobody set as an empty variable (`${HBGW_X:-}`):
every optional setting reads an empty or blank value as unset — never an empty secret that
would turn a platform on with no key, and never a refusal at start."""

from __future__ import annotations

import pytest

from hbgw.core.settings import Settings

OPTIONAL = sorted(n for n, f in Settings.model_fields.items() if f.default is None)


def test_there_are_optional_settings_to_check() -> None:
    assert {"telegram_bot_token", "discord_public_key", "webhook_secret", "broker_url"} <= set(
        OPTIONAL
    )


@pytest.mark.parametrize("name", OPTIONAL)
def test_an_empty_variable_is_unset(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(f"HBGW_{name.upper()}", "")
    assert getattr(Settings(), name) is None
    monkeypatch.setenv(f"HBGW_{name.upper()}", "  ")
    assert getattr(Settings(), name) is None


def test_no_platform_is_served_by_empty_secrets(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("SLACK_SIGNING_SECRET", "SLACK_BOT_TOKEN", "TELEGRAM_BOT_TOKEN",
                 "TELEGRAM_SECRET_TOKEN", "DISCORD_PUBLIC_KEY", "DISCORD_BOT_TOKEN",
                 "DISCORD_APPLICATION_ID", "WEBHOOK_SECRET"):  # fmt: skip
        monkeypatch.setenv(f"HBGW_{name}", "")
    s = Settings()
    configured = (s.slack_configured, s.telegram_configured, s.discord_configured)
    assert configured == (False, False, False) and not s.webhook_configured
