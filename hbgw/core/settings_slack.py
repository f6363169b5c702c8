"""The Slack settings (``HBGW_SLACK_*``), a part of ``Settings`` kept in a module of its own, like
each platform's (``settings_telegram.py``, ``settings_discord.py``): read from the environment,
starred by ``masked()`` and every log line (the two secrets are ``SecretStr``), spelled out for
child processes like any other setting.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydantic import BaseModel, Field, SecretStr, model_validator


class SlackSettings(BaseModel):
    slack_signing_secret: SecretStr | None = Field(
        default=None, description="Signing secret of the Slack app (verifies its requests)."
    )
    slack_bot_token: SecretStr | None = Field(
        default=None, description="Bot token (xoxb-...) the Slack channel posts with."
    )
    slack_api_url: str = Field(
        default="https://slack.com/api/", description="Base URL of Slack's Web API."
    )
    slack_teams: str = Field(
        default="", description="Slack workspace (team) ids accepted, comma-separated; '' any."
    )
    slack_allow_mentions: bool = Field(
        default=False,
        description="Let text sent to Slack keep its markup: <!channel>, <!here>, <@U…> "
        "mentions and <url|label> links. false: &, < and > are escaped, so a reply shows them "
        "as written and pings nobody.",
    )
    slack_timeout: float = Field(
        default=10.0, gt=0, le=60, description="Seconds one Slack Web API request may take."
    )

    if TYPE_CHECKING:  # defined by Settings, which this is a part of

        @property
        def platform_names(self) -> frozenset[str] | None: ...

    @model_validator(mode="after")
    def _slack_needs_both_secrets(self) -> SlackSettings:
        # The API verifies with the signing secret and answers with the token; a worker posts
        # with the token. Half a configuration would fail at the first message, not at start.
        if (self.slack_signing_secret is None) != (self.slack_bot_token is None):
            raise ValueError(
                "set HBGW_SLACK_SIGNING_SECRET and HBGW_SLACK_BOT_TOKEN together (Slack is "
                "served only with both), or neither"
            )
        return self

    @property
    def slack_configured(self) -> bool:
        return self.slack_signing_secret is not None and self.slack_bot_token is not None

    @property
    def slack_team_ids(self) -> frozenset[str]:
        return frozenset(t.strip() for t in self.slack_teams.split(",") if t.strip())
