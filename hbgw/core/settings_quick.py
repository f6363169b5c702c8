"""The few settings `hbgw stamp` reads, without pydantic: a coding agent's hook runs it on every
tool call, and pydantic's import alone was most of a stamp's start (docs/benchmarks.md,
``cli_start``). No other command reads it: they all read ``Settings``.

``quick_settings`` answers only an environment it reads exactly as ``Settings`` does: every
``HBGW_*`` variable is one it knows and every value one that ``Settings`` accepts unchanged.
Anything else (another setting, a value ``Settings`` would refuse or reshape) gives None, and
the caller reads the full ``Settings``, so a refusal is always pydantic's sentence, word for
word. The rules both apply (the database schemes, the placeholder passwords) are written here
once and imported by ``Settings``; tests/unit/test_settings_quick.py feeds the same environments to
both readers and compares what they give.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol
from urllib.parse import urlsplit

# SQLite (built in) and PostgreSQL through psycopg 3, the driver the project ships.
DATABASE_SCHEMES = ("sqlite", "sqlite+pysqlite", "postgresql", "postgresql+psycopg")
PLACEHOLDER = "change-me"
DEFAULT_HOME = "~/.hbgw"
DEFAULT_NAMESPACE = "hbgw"
# Variables that are no setting: the commands read them themselves (Settings ignores them).
COMMAND_VARIABLES = frozenset({"HBGW_SESSION", "HBGW_DEBUG"})
OPTIONAL_PATHS = ("liveness_dir", "redis_tls_ca", "redis_tls_cert", "redis_tls_key")
KNOWN = frozenset(
    {f"HBGW_{name.upper()}" for name in ("home", "namespace", "redis_url", "database_url")}
    | {f"HBGW_{name.upper()}" for name in OPTIONAL_PATHS}
)


def is_placeholder(value: str) -> bool:
    return value.strip().lower().startswith(PLACEHOLDER)


def url_password(url: str) -> str:
    try:
        return urlsplit(url).password or ""
    except ValueError:  # a malformed URL is its own setting's error
        return ""


class RedisSettings(Protocol):
    """What the Redis helpers (``state.redis_url``, ``state.connection``, ``state.redis_tls``,
    ``state.resp_quick``) read of the settings: ``Settings`` and ``QuickSettings`` both have it."""

    @property
    def home(self) -> Path: ...
    @property
    def redis_url(self) -> str | None: ...
    @property
    def redis_tls_ca(self) -> Path | None: ...
    @property
    def redis_tls_cert(self) -> Path | None: ...
    @property
    def redis_tls_key(self) -> Path | None: ...
    @property
    def redis_accept_eviction(self) -> str | None: ...


@dataclass(frozen=True)
class QuickSettings:
    """What a stamp reads: where Redis is, its namespace, and the stamp directory without it."""

    home: Path
    namespace: str = DEFAULT_NAMESPACE
    redis_url: str | None = None
    liveness_dir: Path | None = None
    redis_tls_ca: Path | None = None
    redis_tls_cert: Path | None = None
    redis_tls_key: Path | None = None
    redis_accept_eviction: str | None = None  # a stamp checks no policy (docs/operations.md)

    @property
    def effective_liveness_dir(self) -> Path:  # as Settings.effective_liveness_dir
        return self.liveness_dir or self.home / "liveness"


def quick_settings(environ: Mapping[str, str]) -> QuickSettings | None:
    """The settings ``environ`` gives, or None when only ``Settings`` can tell (see above)."""
    given = {k: v for k, v in environ.items() if k.upper().startswith("HBGW_")}
    if any(k != k.upper() or k not in KNOWN | COMMAND_VARIABLES for k in given):
        return None  # another setting, or a spelling pydantic matches case-insensitively
    home, namespace = given.get("HBGW_HOME"), given.get("HBGW_NAMESPACE", DEFAULT_NAMESPACE)
    if home is not None and not home.strip():
        return None
    # compose and Helm pass an unset optional setting as an empty variable (``_blank_is_unset``).
    redis_url = given.get("HBGW_REDIS_URL", "").strip() and given["HBGW_REDIS_URL"]
    # A stamp never opens the database, but a value Settings refuses is refused here too: every
    # command, the stamp included, exits 2 on it with pydantic's sentence.
    database_url = given.get("HBGW_DATABASE_URL", "").strip() and given["HBGW_DATABASE_URL"]
    paths = {
        name: Path(value) if (value := given.get(f"HBGW_{name.upper()}", "")).strip() else None
        for name in OPTIONAL_PATHS
    }
    if not _accepted(redis_url or None, database_url or None, paths):
        return None
    tls = {n: p.expanduser() if p else None for n, p in paths.items()}  # as Settings expands
    return QuickSettings(
        home=Path(home or DEFAULT_HOME).expanduser(),
        namespace=namespace,
        redis_url=redis_url or None,
        liveness_dir=paths["liveness_dir"],
        redis_tls_ca=tls["redis_tls_ca"],
        redis_tls_cert=tls["redis_tls_cert"],
        redis_tls_key=tls["redis_tls_key"],
    )


def _accepted(
    redis_url: str | None, database_url: str | None, paths: dict[str, Path | None]
) -> bool:
    """Whether ``Settings`` takes these values as they are (its validators' rules)."""
    for url in (redis_url, database_url):
        if url and is_placeholder(url_password(url)):
            return False
    if database_url:
        scheme, sep, _rest = database_url.partition("://")
        if not sep or scheme.lower() not in DATABASE_SCHEMES:
            return False
    return (paths["redis_tls_cert"] is None) == (paths["redis_tls_key"] is None)
