"""``core.settings_quick`` reads the few settings of `hbgw stamp` without pydantic. The parity of
the two readers, fed the same environments: where it answers, it answers what ``Settings`` does;
where ``Settings`` would refuse or reshape a value, or another setting is set, it does not
answer (None), so the stamp reads ``Settings`` and says its refusal."""

from __future__ import annotations

import os

import pytest

from hbgw.core.settings import Settings
from hbgw.core.settings_quick import COMMAND_VARIABLES, KNOWN, quick_settings

FIELDS = (
    "home",
    "namespace",
    "redis_url",
    "liveness_dir",
    "redis_tls_ca",
    "redis_tls_cert",
    "redis_tls_key",
    "effective_liveness_dir",
)


def own_environment(monkeypatch: pytest.MonkeyPatch, env: dict[str, str]) -> dict[str, str]:
    for name in list(os.environ):
        if name.upper().startswith("HBGW_"):
            monkeypatch.delenv(name)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    return dict(os.environ)


@pytest.mark.parametrize(
    "env",
    [
        {},
        {"HBGW_HOME": "~/elsewhere", "HBGW_NAMESPACE": "team-a", "HBGW_SESSION": "s1"},
        {"HBGW_REDIS_URL": "redis://:secret@127.0.0.1:6379/3", "HBGW_LIVENESS_DIR": "~/stamps"},
        {"HBGW_REDIS_URL": "  ", "HBGW_DATABASE_URL": "", "HBGW_LIVENESS_DIR": ""},
        {"HBGW_DATABASE_URL": "postgresql+psycopg://u:p@db:5432/hbgw", "HBGW_DEBUG": "1"},
        {"HBGW_DATABASE_URL": "SQLite:////var/lib/hbgw.sqlite3"},
        {"HBGW_DATABASE_URL": "postgresql://u:s3cret@db/x", "HBGW_REDIS_URL": "unix:///r.sock"},
        {
            "HBGW_REDIS_URL": "rediss://redis:6380/0",
            "HBGW_REDIS_TLS_CA": "~/ca.pem",
            "HBGW_REDIS_TLS_CERT": "~/c.pem",
            "HBGW_REDIS_TLS_KEY": "/k.pem",
        },
    ],
)
def test_where_the_quick_reader_answers_it_answers_what_settings_does(
    monkeypatch: pytest.MonkeyPatch, env: dict[str, str]
) -> None:
    quick = quick_settings(own_environment(monkeypatch, env))
    assert quick is not None
    full = Settings()
    assert {f: getattr(quick, f) for f in FIELDS} == {f: getattr(full, f) for f in FIELDS}


@pytest.mark.parametrize(
    ("env", "refused"),
    [
        ({"HBGW_MIN_INTERVAL": "30"}, False),  # another setting: Settings reads it
        ({"hbgw_namespace": "x"}, False),  # pydantic matches names case-insensitively
        ({"HBGW_HOME": " "}, False),
        ({"HBGW_REDIS_URL": "redis://:change-me@redis:6379/0"}, True),
        ({"HBGW_DATABASE_URL": "mysql://u@db/x"}, True),
        ({"HBGW_DATABASE_URL": "not a url"}, True),
        ({"HBGW_DATABASE_URL": "postgresql://u:change-me-please@db/x"}, True),
        ({"HBGW_REDIS_TLS_CERT": "/c.pem"}, True),
    ],
)
def test_what_only_settings_can_tell_is_left_to_it(
    monkeypatch: pytest.MonkeyPatch, env: dict[str, str], refused: bool
) -> None:
    assert quick_settings(own_environment(monkeypatch, env)) is None
    if refused:  # so the refusal is pydantic's sentence, as the full command says it
        with pytest.raises(ValueError):
            Settings()


def test_the_variables_it_knows_are_settings_and_the_commands_own_are_not() -> None:
    fields = {f"HBGW_{name.upper()}" for name in Settings.model_fields}
    assert fields >= KNOWN
    assert not COMMAND_VARIABLES & fields
