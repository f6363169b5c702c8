"""Which platforms this deployment serves: HBGW_PLATFORMS, and the clients its settings allow.

A session lives on one platform. Its turns are delivered only there (routes are pinned, never a
fallback); a session on a platform that is not served is refused with a sentence, when it is
created, when a message arrives, and when a turn would deliver to it.
"""

from __future__ import annotations

from dataclasses import dataclass

from hbgw.core.errors import BadInput, PlatformNotEnabled
from hbgw.core.settings import Settings


@dataclass(frozen=True)
class Served:
    """``names`` None: every platform (HBGW_PLATFORMS=*); ``configured``: the platforms with
    a client of their own whose settings are present (each is delivered through it)."""

    names: frozenset[str] | None
    configured: frozenset[str]

    @classmethod
    def from_settings(cls, settings: Settings) -> Served:
        """What the deployment serves; ``BadInput`` (its sentences) when HBGW_PLATFORMS names
        a platform without its settings: the API and the workers do not start so."""
        missing = settings.missing_platform_settings()
        if missing:
            raise BadInput("; ".join(missing) + ".")
        configured = {"slack"} if settings.slack_configured else set()
        configured |= {"telegram"} if settings.telegram_configured else set()
        configured |= {"discord"} if settings.discord_configured else set()
        configured |= {"webhook"} if settings.webhook_configured else set()
        return cls(settings.platform_names, frozenset(configured))

    def serves(self, platform: str) -> bool:
        # '*': every platform; those without a configured client are recorded by HBGW_CHANNEL
        # (development, tests, the demo). Production names its platforms.
        return self.names is None or platform in self.names

    def has_own_client(self, platform: str) -> bool:
        return platform in self.configured

    def check(self, platform: str) -> None:
        if not self.serves(platform):
            raise PlatformNotEnabled(self.refusal(platform))

    def refusal(self, platform: str) -> str:
        served = ", ".join(sorted(self.names or ()))
        return (
            f"Platform {platform} is not enabled here (HBGW_PLATFORMS is {served}); its "
            "sessions take no messages and get no deliveries."
        )
