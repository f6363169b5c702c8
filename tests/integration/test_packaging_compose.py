"""docker-compose.yml passes every HBGW_* setting set in .env to the roles (issue 20: only a
fixed few reached them), each secret only to the roles that use it, and the roles refuse
.env.example's change-me placeholders."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from pydantic import SecretStr, ValidationError
from support.packaging_tools import CHART, ROOT, compose_binary, render, run

from hbgw.core.settings import Settings

ROLES = ("migrate", "api", "beat", "worker-1", "flower")
REQUIRED = {
    "POSTGRES_PASSWORD": "ci-password",
    "REDIS_PASSWORD": "ci-redis-password",
    "HBGW_ADMIN_TOKEN": "ci-admin-token-0123456789abcdef",
    "HBGW_FLOWER_PASSWORD": "ci-flower-password",
}
URLS_WITH_CREDENTIALS = {"database_url", "redis_url", "broker_url", "webhook_url"}
SECRETS = {
    f"HBGW_{name.upper()}"
    for name, field in Settings.model_fields.items()
    if SecretStr in getattr(field.annotation, "__args__", ()) or name in URLS_WITH_CREDENTIALS
}
PLAIN = {f"HBGW_{name.upper()}" for name in Settings.model_fields} - SECRETS


def _services(tmp_path: Path, dotenv: str) -> dict[str, Any]:
    env_file = tmp_path / ".env"
    env_file.write_text(dotenv)
    env = {"PATH": os.environ.get("PATH", ""), "HOME": str(tmp_path)}
    args: list[str | Path] = [compose_binary(), "--env-file", env_file]
    done = run([*args, "-f", ROOT / "docker-compose.yml", "config", "--format", "json"], env=env)
    assert done.returncode == 0, done.stderr
    services: dict[str, Any] = json.loads(done.stdout)["services"]
    return services


def _dotenv(**values: str) -> str:
    return "".join(f"{k}={v}\n" for k, v in {**REQUIRED, **values}.items())


def test_a_setting_added_to_dotenv_reaches_the_containers(tmp_path: Path) -> None:
    services = _services(tmp_path, _dotenv(HBGW_OPENAI_HEARTBEAT_MODEL="small-model"))
    for role in ROLES:
        assert services[role]["environment"]["HBGW_OPENAI_HEARTBEAT_MODEL"] == "small-model"


def test_every_plain_setting_reaches_every_role(tmp_path: Path) -> None:
    # The value compose fixes for a role (the metrics address of beat and workers) stands.
    fixed = {"HBGW_METRICS_HOST", "HBGW_METRICS_PORT"}
    services = _services(tmp_path, _dotenv(**{name: f"v-{name}" for name in PLAIN}))
    for role in ROLES:
        env = services[role]["environment"]
        wrong = {n for n in PLAIN - fixed if env.get(n) != f"v-{n}"}
        assert wrong == set(), role
    # Unset, a plain setting is not passed at all: the role's default holds.
    bare = _services(tmp_path, _dotenv())
    assert bare["api"]["environment"].get("HBGW_OPENAI_HEARTBEAT_MODEL") is None


def test_each_role_gets_the_secrets_the_chart_gives_it(tmp_path: Path) -> None:
    (tmp_path / "compose").mkdir()
    services = _services(tmp_path / "compose", _dotenv())
    chart = [o["object"] for o in render(CHART / "ci" / "default-values.yaml", tmp_path / "chart")]
    by_role: dict[str, set[str]] = {}
    for workload in chart:
        if workload["kind"] in ("Deployment", "Job"):
            role = workload["spec"]["template"]["metadata"]["labels"]["app.kubernetes.io/component"]
            env = workload["spec"]["template"]["spec"]["containers"][0]["env"]
            by_role[role] = {e["name"] for e in env if "secretKeyRef" in e.get("valueFrom", {})}
    for role in ROLES:
        got = set(services[role]["environment"]) & SECRETS
        assert got == by_role[role.removesuffix("-1")], role


@pytest.mark.parametrize(
    ("name", "value", "sentence"),
    [
        ("HBGW_ADMIN_TOKEN", "change-me-to-a-long-random-token", "HBGW_ADMIN_TOKEN is still"),
        ("HBGW_FLOWER_PASSWORD", "change-me-too", "HBGW_FLOWER_PASSWORD is still"),
        (
            "HBGW_DATABASE_URL",
            "postgresql+psycopg://hbgw:change-me@postgres:5432/hbgw",
            "the password in HBGW_DATABASE_URL is still",
        ),
        (
            "HBGW_REDIS_URL",
            "redis://:change-me-redis@redis:6379/0",
            "REDIS_PASSWORD in compose's .env",
        ),
    ],
)
def test_dotenv_example_placeholders_are_refused(
    monkeypatch: pytest.MonkeyPatch, name: str, value: str, sentence: str
) -> None:
    monkeypatch.setenv(name, value)
    with pytest.raises(ValidationError) as refused:
        Settings()
    assert sentence in str(refused.value) and "placeholder of .env.example" in str(refused.value)
    monkeypatch.setenv(name, value.replace("change-me", "s3cr3t-value-0123456789"))
    Settings()


def test_every_placeholder_of_dotenv_example_is_refused() -> None:
    # The compose URLs are built from POSTGRES_PASSWORD and REDIS_PASSWORD.
    example = dict(
        line.split("=", 1)
        for line in (ROOT / ".env.example").read_text().splitlines()
        if line and not line.startswith("#")
    )
    placeholders = {k: v for k, v in example.items() if v.startswith("change-me")}
    assert set(placeholders) == set(REQUIRED)
    for key, value in placeholders.items():
        given = {
            "POSTGRES_PASSWORD": {"database_url": f"postgresql://hbgw:{value}@pg:5432/hbgw"},
            "REDIS_PASSWORD": {"redis_url": f"redis://:{value}@redis:6379/0"},
        }.get(key, {key.removeprefix("HBGW_").lower(): value})
        with pytest.raises(ValidationError):
            Settings.model_validate(given)
