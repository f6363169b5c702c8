"""One settings object per process, read from ``HBGW_*`` environment variables."""

from __future__ import annotations

import logging
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, SecretStr, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from hbgw.core.masking import mask_command, mask_url, mask_webhook_url
from hbgw.core.outbound import OPERATOR_REMEDY, OutboundGuard
from hbgw.core.owner_chats import OwnerChats
from hbgw.core.settings_agent import AgentToolSettings
from hbgw.core.settings_beat import BeatSettings
from hbgw.core.settings_costs import CostSettings
from hbgw.core.settings_delivery import BrokerSettings, DeliverySettings
from hbgw.core.settings_discord import DiscordSettings
from hbgw.core.settings_jobs import JobSettings
from hbgw.core.settings_placeholders import PlaceholderCheck
from hbgw.core.settings_quick import DATABASE_SCHEMES, DEFAULT_HOME
from hbgw.core.settings_retention import RetentionSettings
from hbgw.core.settings_slack import SlackSettings
from hbgw.core.settings_telegram import TelegramSettings
from hbgw.core.settings_webhook import WebhookSettings

__all__ = ["Settings", "get_settings", "mask_url"]  # mask_url: imported from here by callers
DATABASE_URLS = "use sqlite:///PATH or postgresql://USER:PASSWORD@HOST:PORT/DATABASE"

# What each platform with a client of its own needs before a deployment may name it.
PLATFORM_NEEDS = {
    "slack": ("slack_configured", "HBGW_SLACK_SIGNING_SECRET and HBGW_SLACK_BOT_TOKEN"),
    "telegram": (
        "telegram_configured",
        "HBGW_TELEGRAM_BOT_TOKEN and HBGW_TELEGRAM_SECRET_TOKEN",
    ),
    "discord": (
        "discord_configured",
        "HBGW_DISCORD_PUBLIC_KEY, HBGW_DISCORD_BOT_TOKEN and HBGW_DISCORD_APPLICATION_ID",
    ),
    "webhook": ("webhook_configured", "HBGW_WEBHOOK_SECRET"),
}


# Each platform's settings, and the refusal of placeholders, live in modules of their own.
def _no_resolving(host: str, port: int) -> list[str]:
    """Settings are read by every command: names are not looked up then, only when connecting."""
    return []


# Redis' and Valkey's evicting policies (redis.conf), and "unreadable" (neither CONFIG GET nor
# INFO answers it): what HBGW_REDIS_ACCEPT_EVICTION may name (hbgw/state/eviction.py).
REDIS_EVICTING_POLICIES = frozenset(
    {
        "allkeys-lru",
        "allkeys-lfu",
        "allkeys-random",
        "volatile-lru",
        "volatile-lfu",
        "volatile-random",
        "volatile-ttl",
    }
)
ACCEPTABLE_EVICTION = REDIS_EVICTING_POLICIES | {"unreadable"}


class Settings(
    BaseSettings,
    BeatSettings,
    BrokerSettings,
    DeliverySettings,
    SlackSettings,
    TelegramSettings,
    DiscordSettings,
    WebhookSettings,
    JobSettings,
    CostSettings,
    RetentionSettings,
    AgentToolSettings,
    PlaceholderCheck,
):
    model_config = SettingsConfigDict(env_prefix="HBGW_", extra="ignore")

    home: Path = Field(default=Path(DEFAULT_HOME), description="Data directory.")
    database_url: str | None = Field(
        default=None, description="SQLAlchemy URL; unset means a SQLite file in HBGW_HOME."
    )
    redis_url: str | None = Field(
        default=None, description="State Redis (redis[s]://, sentinel://, redis+cluster://)."
    )
    redis_tls_ca: Path | None = Field(
        default=None,
        description="PEM file of the CA that signed Redis's certificate (rediss://); unset "
        "means the system's CAs. The certificate is always verified.",
    )
    redis_tls_cert: Path | None = Field(
        default=None, description="PEM client certificate for Redis (with HBGW_REDIS_TLS_KEY)."
    )
    redis_tls_key: Path | None = Field(default=None, description="PEM private key of the cert.")
    redis_accept_eviction: str | None = Field(
        default=None,
        description="The one evicting maxmemory-policy of Redis the roles accept (e.g. "
        "allkeys-lru), with a warning and a metric; unset: every role refuses any policy but "
        "noeviction. Another policy later is refused again.",
    )
    namespace: str = Field(default="hbgw", description="Prefix of every Redis key.")
    min_interval: float = Field(default=60.0, gt=0, description="Smallest interval, seconds.")
    default_interval: str = Field(default="5m", description="Interval of /heartbeat <prompt>.")
    max_prompt_chars: int = Field(default=4000, gt=0, description="Longest prompt accepted.")
    jitter: bool = Field(default=True, description="Stagger heartbeats (contract: Policies).")
    max_message_chars: int = Field(
        default=16_000, gt=0, description="Longest user message accepted, in characters."
    )
    lock_lease: float = Field(
        default=30.0,
        gt=0,
        description="Session lock lease, seconds. A lock holder's Redis calls time out after a "
        "quarter of it (0.25-5 s), and a send needs a lock confirmation younger than a third of "
        "it: keep it at 1 s or more.",
    )
    worker_ttl: float = Field(
        default=10.0, gt=0, description="Seconds without a refresh before a worker counts as dead."
    )
    worker_turns: int = Field(
        default=64,
        ge=1,
        le=4096,
        description="Turns one worker process holds at once (`hbgw worker --turns`): each waits "
        "for its model in a thread of the turn runner; more wait in its queue without a lock.",
    )
    refund_backoff: float = Field(
        default=30.0, ge=0, description="Seconds before a refunded fire is tried again."
    )
    agent: str = Field(default="echo", description="Agent kind: echo, command or openai.")
    agent_command: str | None = Field(default=None, description="Command run by the command agent.")
    agent_timeout: float = Field(default=120.0, gt=0, description="Command agent timeout, seconds.")
    agent_env_allow: str = Field(
        default="PATH,HOME,LANG,LC_ALL,TZ,TMPDIR",
        description="Comma-separated environment variables the command agent's child inherits; "
        "nothing else reaches it (no HBGW_* setting, no secret).",
    )
    agent_user: str = Field(
        default="nobody",
        description="User the command agent runs as: not root, not the worker's own user, so "
        "it reads none of the worker's secrets (its environment, memory, files). The worker "
        "needs root (or CAP_SETUID and CAP_SETGID) to switch to it.",
    )
    agent_same_user: bool = Field(
        default=False,
        description="Run the command agent as the worker's own user instead (it can then read "
        "the worker's files in HBGW_HOME and any secret file it reads); logged as a warning.",
    )
    agent_log: Path | None = Field(
        default=None, description="JSONL file where the echo agent records every turn request."
    )
    echo_delay: float = Field(default=0.0, ge=0, description="Seconds the echo agent takes a turn.")
    echo_silent_heartbeats: bool = Field(
        default=False, description="Echo agent answers heartbeat turns with [SILENT]."
    )
    channel: str = Field(default="console", description="Delivery channel: console or file.")
    channel_file: Path | None = Field(default=None, description="JSONL file of the file channel.")
    platforms: str = Field(
        default="*",
        description="Platforms served, comma-separated (slack, cli, ...); a session on another "
        "is refused. '*': every platform, those without settings through HBGW_CHANNEL.",
    )
    openai_base_url: str | None = Field(
        default=None, description="Base URL of an OpenAI-compatible API (HBGW_AGENT=openai)."
    )
    openai_api_key: SecretStr | None = Field(default=None, description="API key of that endpoint.")
    openai_model: str | None = Field(default=None, description="Model of every turn.")
    openai_heartbeat_model: str | None = Field(
        default=None, description="Model of heartbeat turns; unset means HBGW_OPENAI_MODEL."
    )
    openai_timeout: float = Field(
        default=60.0, gt=0, description="Seconds one model request may take."
    )
    openai_max_retries: int = Field(
        default=2, ge=0, le=10, description="Retries of a model request on 429, 5xx or timeout."
    )
    api_host: str = Field(default="127.0.0.1", description="Address the HTTP API listens on.")
    api_port: int = Field(default=8780, ge=0, le=65535, description="Port of the HTTP API.")
    api_tokens: SecretStr | None = Field(
        default=None, description="API bearer tokens: comma-separated owner:token pairs."
    )
    admin_token: SecretStr | None = Field(
        default=None, description="API bearer token of operators: every session."
    )
    owner_chats: str = Field(
        default="",
        description="Chats bound to owner tokens, like alice=slack:C012ABC,telegram:-100123;"
        "bob=discord:1234567890: an owner token makes slack, telegram, discord and webhook "
        "sessions only for its bound chats ('' none).",
    )
    api_max_body_bytes: int = Field(
        default=65_536, ge=1024, description="Largest HTTP request body accepted, in bytes."
    )
    api_stream_poll: float = Field(
        default=5.0,
        gt=0,
        le=60,
        description="Seconds between an API process's sweeps for event-stream wake-ups lost.",
    )
    api_stream_recheck: float = Field(
        default=120.0,
        gt=0,
        le=3600,
        description="Seconds between an idle event stream's own reads of its session.",
    )
    api_id_key: SecretStr | None = Field(
        default=None,
        description=(
            "Key of the public message and run ids (API, signed webhooks); unset: a random key "
            "made once and kept in the database."
        ),
    )
    api_max_sessions_per_owner: int = Field(
        default=500,
        ge=0,
        description="Most sessions (not closed) one owner may hold, by any path; 0: any.",
    )
    api_max_heartbeats_per_owner: int = Field(
        default=100,
        ge=0,
        description="Most heartbeats (not cleared) of one owner, by any path; 0: any.",
    )
    api_max_streams_per_owner: int = Field(
        default=20,
        ge=0,
        description="Most event streams one owner keeps open per API replica; 0: any.",
    )
    api_messages_per_minute: int = Field(
        default=60,
        ge=0,
        description="Most messages one session accepts a minute (in Redis); 0: any.",
    )
    api_keep_alive: int = Field(
        default=5, ge=1, le=300, description="Seconds an idle keep-alive connection stays open."
    )
    api_read_timeout: float = Field(
        default=10.0,
        gt=0,
        le=300,
        description="Seconds a client has to send a request's headers, and its body; then 408.",
    )
    metrics_port: int = Field(
        default=0, ge=0, le=65535, description="Port of /metrics of beat or a worker; 0 is off."
    )
    metrics_host: str = Field(
        default="127.0.0.1", description="Address /metrics of beat or a worker listens on."
    )
    flower_password: SecretStr | None = Field(
        default=None, description="Flower basic-auth password."
    )
    flower_user: str = Field(default="admin", description="Flower basic-auth user name.")
    flower_host: str = Field(default="127.0.0.1", description="Address Flower listens on.")
    flower_port: int = Field(default=5555, ge=1, le=65535, description="Port of Flower.")
    task_events: bool = Field(
        default=True,
        description="Celery task events for Flower's task list; off spares a Redis publish per "
        "task step (Flower still lists the workers).",
    )
    stale_after: float = Field(
        default=300.0, gt=0, description="Seconds without a stamp before a turn is stale?."
    )
    dead_after: float = Field(
        default=900.0, gt=0, description="Seconds without a stamp before a turn is dead?."
    )
    liveness_dir: Path | None = Field(
        default=None, description="Stamps of `hbgw stamp` without Redis (HBGW_HOME/liveness)."
    )
    reconcile_interval: float = Field(
        default=30.0, gt=0, description="Seconds between beat's liveness reconciler passes."
    )
    alert_webhook: SecretStr | None = Field(
        default=None, description="URL that gets a JSON POST for every newly dead turn."
    )
    clock_skew_warn: float = Field(
        default=2.0,
        gt=0,
        description="Seconds this host's clock may differ from the shared clock (Redis TIME) "
        "before the process says so in its log.",
    )
    alert_webhook_secret: SecretStr | None = Field(
        default=None,
        description="Signs every alert: X-Hbgw-Signature t=<unix>,v1=HMAC-SHA256(<t>.<body>).",
    )
    log_format: Literal["json", "text", "auto"] = Field(
        default="auto", description="Log lines: json, text, or auto (text on a terminal)."
    )
    log_level: str = Field(default="INFO", description="Lowest level logged, like INFO or DEBUG.")

    @field_validator("home", mode="after")
    @classmethod
    def _expand_home(cls, value: Path) -> Path:
        return value.expanduser()

    @field_validator("redis_tls_ca", "redis_tls_cert", "redis_tls_key", mode="after")
    @classmethod
    def _expand_tls_path(cls, value: Path | None) -> Path | None:
        return value.expanduser() if value is not None else None

    @field_validator("redis_accept_eviction", mode="after")
    @classmethod
    def _a_policy_redis_has(cls, value: str | None) -> str | None:
        if value is None:
            return None
        if value not in ACCEPTABLE_EVICTION:
            raise ValueError(
                f"HBGW_REDIS_ACCEPT_EVICTION names the maxmemory-policy to accept; "
                f"{value!r} is none of {', '.join(sorted(ACCEPTABLE_EVICTION))} (unset it when "
                "Redis runs with noeviction)"
            )
        return value

    @field_validator("agent_env_allow", mode="after")
    @classmethod
    def _no_gateway_setting_for_the_agent(cls, value: str) -> str:
        # The gateway's settings hold its database URL, Redis password and tokens: a command
        # that follows its prompt could use them to change any owner's sessions.
        names = [name.strip() for name in value.split(",") if name.strip()]
        own = [name for name in names if name.upper().startswith("HBGW_")]
        if own:
            raise ValueError(
                f"{', '.join(own)} cannot be passed to the command agent: the gateway's HBGW_* "
                "settings carry its database URL, Redis password and tokens"
            )
        return ",".join(names)

    @property
    def agent_env_names(self) -> tuple[str, ...]:
        return tuple(name for name in self.agent_env_allow.split(",") if name)

    @field_validator("owner_chats", mode="after")
    @classmethod
    def _owner_chats_parse(cls, value: str) -> str:
        OwnerChats.parse(value)  # a typo stops the process at start, naming its entry
        return value

    @field_validator("log_level", mode="after")
    @classmethod
    def _known_level(cls, value: str) -> str:
        level = value.upper()
        if level not in logging.getLevelNamesMapping():
            raise ValueError(f"{value!r} is not a log level; use DEBUG, INFO, WARNING or ERROR")
        return level

    @field_validator("database_url", mode="after")
    @classmethod
    def _supported_database(cls, value: str | None) -> str | None:
        # Checked here, not when the engine is made: an unsupported URL would otherwise surface
        # as a missing driver module (MySQLdb, psycopg2) from deep inside SQLAlchemy.
        if not value:
            return value
        scheme, sep, _rest = value.partition("://")
        if not sep:
            raise ValueError(f"it is not a URL; {DATABASE_URLS}")
        if scheme.lower() not in DATABASE_SCHEMES:
            raise ValueError(f"{scheme}:// is not supported; {DATABASE_URLS}")
        return value

    @model_validator(mode="after")
    def _client_certificate_has_its_key(self) -> Settings:
        if (self.redis_tls_cert is None) != (self.redis_tls_key is None):
            raise ValueError(
                "set HBGW_REDIS_TLS_CERT and HBGW_REDIS_TLS_KEY together (a client certificate "
                "is useless without its key), or neither"
            )
        return self

    @model_validator(mode="after")
    def _webhooks_stay_outside(self) -> Settings:
        # The operator's own URLs follow the rule of a tenant's (core/outbound.py): an inside
        # address written in the URL stops the start; a name is checked when connecting.
        guard = OutboundGuard(self.outbound_allowlist, resolve=_no_resolving)
        urls = {"HBGW_WEBHOOK_URL": self.webhook_url}
        if self.alert_webhook is not None:
            urls["HBGW_ALERT_WEBHOOK"] = self.alert_webhook.get_secret_value()
        for name, url in urls.items():
            problem = guard.url_problem(url, OPERATOR_REMEDY) if url else None
            if problem is not None:
                raise ValueError(f"{name}: {problem}")
        return self

    @model_validator(mode="before")
    @classmethod
    def _blank_is_unset(cls, values: Any) -> Any:
        # compose and Helm pass an optional setting nobody set as an empty variable
        # (`${HBGW_X:-}`): that is "unset", not an empty secret, key or URL.
        if not isinstance(values, dict):
            return values
        optional = {n for n, f in cls.model_fields.items() if f.default is None}
        return {
            k: None if k in optional and isinstance(v, str) and not v.strip() else v
            for k, v in values.items()
        }

    def missing_platform_settings(self) -> list[str]:
        """A sentence for each platform HBGW_PLATFORMS names without the settings it needs;
        checked by the roles that serve platforms (``Served``): beat and Flower get none."""
        names = self.platform_names or frozenset()
        return [
            f"HBGW_PLATFORMS names {platform}: set {needs} too"
            for platform, (configured, needs) in PLATFORM_NEEDS.items()
            if platform in names and not getattr(self, configured)
        ]

    @model_validator(mode="after")
    def _platforms_name_some(self) -> Settings:
        names = self.platform_names
        if names is not None and not names:
            raise ValueError("HBGW_PLATFORMS names no platform; name some (slack,cli) or '*'")
        return self

    @property
    def platform_names(self) -> frozenset[str] | None:
        """The platforms HBGW_PLATFORMS names; None for '*', every platform."""
        names = {name.strip() for name in self.platforms.split(",") if name.strip()}
        return None if "*" in names else frozenset(names)

    @property
    def owner_chat_bindings(self) -> OwnerChats:
        """HBGW_OWNER_CHATS parsed (checked at start, so this cannot fail)."""
        return OwnerChats.parse(self.owner_chats)

    @property
    def effective_database_url(self) -> str:
        if self.database_url:
            return self.database_url
        return f"sqlite:///{self.home / 'hbgw.sqlite3'}"

    @property
    def effective_liveness_dir(self) -> Path:
        return self.liveness_dir or self.home / "liveness"

    def masked(self) -> dict[str, Any]:
        """Effective settings for display; secrets starred, in URLs too (``core.masking``)."""
        out: dict[str, Any] = {}
        for name in type(self).model_fields:
            value = getattr(self, name)
            if isinstance(value, SecretStr):
                value = "********" if value.get_secret_value() else ""
            elif name == "agent_command" and isinstance(value, str):
                value = mask_command(value)
            elif name == "webhook_url" and isinstance(value, str):
                value = mask_webhook_url(value)  # its path may be the token (the logs agree)
            elif isinstance(value, str) and "://" in value:
                value = mask_url(value)
            elif isinstance(value, Path):
                value = str(value)
            out[name] = value
        out["database_url"] = mask_url(self.effective_database_url)
        return out


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    return Settings()
