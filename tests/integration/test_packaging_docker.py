"""The Dockerfile passes hadolint at the warning threshold; docker-compose.yml passes `config`.

No image is built (no Docker engine here): the real linters are the check, and each is shown to
reject a deliberately broken input.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import pytest
from support.packaging_tools import DATA, ROOT, compose_binary, run, tool

SECRETS = {
    "POSTGRES_PASSWORD": "ci-password",
    "REDIS_PASSWORD": "ci-redis-password",
    "HBGW_ADMIN_TOKEN": "ci-admin-token",
    "HBGW_FLOWER_PASSWORD": "ci-flower-password",
}
ROLES_WITH_HEALTHCHECK = ("api", "beat", "worker", "flower")


def compose_env(tmp_path: Path, **extra: str) -> tuple[dict[str, str], list[str]]:
    # An empty env file: a developer's own .env must not make the check pass or fail.
    env_file = tmp_path / "empty.env"
    env_file.write_text("")
    env = {"PATH": os.environ.get("PATH", ""), "HOME": str(tmp_path), **extra}
    return env, ["--env-file", str(env_file)]


def test_dockerfile_passes_hadolint_at_the_warning_threshold() -> None:
    done = run([tool("hadolint"), "--failure-threshold", "warning", ROOT / "Dockerfile"])
    assert done.returncode == 0, done.stdout + done.stderr


def test_hadolint_rejects_a_dockerfile_with_a_warning(tmp_path: Path) -> None:
    broken = tmp_path / "Dockerfile"
    broken.write_text("FROM python:3.11-slim\nRUN apt-get update && apt-get install -y curl\n")
    done = run([tool("hadolint"), "--failure-threshold", "warning", broken])
    assert done.returncode != 0
    assert "DL3008" in done.stdout  # unpinned apt package: a warning


def stages(dockerfile: str) -> dict[str, str]:
    """Each build stage's text by its name."""
    parts = re.split(r"^FROM\s+\S+\s+AS\s+(\S+)\s*$", dockerfile, flags=re.MULTILINE)
    return dict(zip(parts[1::2], parts[2::2], strict=True))


def test_dockerfile_has_a_non_root_target_with_a_healthcheck_per_role() -> None:
    text = (ROOT / "Dockerfile").read_text()
    by_name = stages(text)
    assert re.search(r"^USER 10001:10001$", by_name["base"], flags=re.MULTILINE)
    for role in ROLES_WITH_HEALTHCHECK:
        assert "HEALTHCHECK" in by_name[role], role
        assert re.search(rf"^FROM base AS {role}$", text, flags=re.MULTILINE), role
    assert 'CMD ["migrate"]' in by_name["migrate"]
    # The final image copies the built venv only; build tools stay in the build stage.
    assert "pip install" not in by_name["base"]
    assert "COPY --from=build /opt/hbgw /opt/hbgw" in by_name["base"]


def test_compose_file_passes_the_compose_binary_config(tmp_path: Path) -> None:
    env, env_file = compose_env(tmp_path, **SECRETS)
    cmd: list[str | Path] = [
        compose_binary(),
        *env_file,
        "-f",
        ROOT / "docker-compose.yml",
        "config",
    ]
    done = run([*cmd, "--quiet"], env=env)
    assert done.returncode == 0, done.stderr
    done = run([*cmd, "--format", "json"], env=env)
    assert done.returncode == 0, done.stderr
    services = json.loads(done.stdout)["services"]
    assert set(services) == {
        "redis", "postgres", "migrate", "api", "beat", "worker-1", "worker-2", "worker-3", "flower",
    }  # fmt: skip
    assert "--maxmemory-policy noeviction" in " ".join(services["redis"]["command"])
    assert services["beat"]["deploy"]["replicas"] == 2
    for role in ("beat", "worker-1"):
        # /metrics (their health check) must answer from outside the container.
        assert services[role]["environment"]["HBGW_METRICS_HOST"] == "0.0.0.0"
    names = {services[f"worker-{i}"]["command"][2] for i in (1, 2, 3)}
    assert names == {"worker-1", "worker-2", "worker-3"}
    for role in ("api", "beat", "worker-1", "flower"):
        after = services[role]["depends_on"]["migrate"]["condition"]
        assert after == "service_completed_successfully", role
        assert services[role]["read_only"] is True, role
    assert services["flower"]["environment"]["HBGW_FLOWER_PASSWORD"] == "ci-flower-password"


REQUIRED_SECRETS = (
    "POSTGRES_PASSWORD",
    "REDIS_PASSWORD",
    "HBGW_ADMIN_TOKEN",
    "HBGW_FLOWER_PASSWORD",
)


@pytest.mark.parametrize("missing", sorted(SECRETS))
def test_compose_refuses_to_start_without_its_secrets(tmp_path: Path, missing: str) -> None:
    # Each one missing alone: with several missing, compose names whichever it meets first,
    # and that order is not fixed.
    given = {name: value for name, value in SECRETS.items() if name != missing}
    env, env_file = compose_env(tmp_path, **given)
    done = run(
        [compose_binary(), *env_file, "-f", ROOT / "docker-compose.yml", "config", "--quiet"],
        env=env,
    )
    assert done.returncode != 0
    assert f"set {missing}" in done.stderr


def test_compose_binary_rejects_a_broken_file(tmp_path: Path) -> None:
    env, env_file = compose_env(tmp_path)
    broken = DATA / "broken-compose.yml"
    done = run([compose_binary(), *env_file, "-f", broken, "config", "--quiet"], env=env)
    assert done.returncode != 0
    assert done.stderr.strip()


def _services(tmp_path: Path, **extra: str) -> dict[str, Any]:
    env, env_file = compose_env(tmp_path, **SECRETS, **extra)
    cmd: list[str | Path] = [compose_binary(), *env_file, "-f", ROOT / "docker-compose.yml"]
    done = run([*cmd, "config", "--format", "json"], env=env)
    assert done.returncode == 0, done.stderr
    services: dict[str, Any] = json.loads(done.stdout)["services"]
    return services


SECRET_NAMES = {
    "HBGW_DATABASE_URL", "HBGW_REDIS_URL", "HBGW_ADMIN_TOKEN", "HBGW_API_TOKENS",
    "HBGW_OPENAI_API_KEY", "HBGW_FLOWER_PASSWORD", "HBGW_ALERT_WEBHOOK",
    "HBGW_ALERT_WEBHOOK_SECRET",
}  # fmt: skip
ROLE_SECRETS = {
    "migrate": {"HBGW_DATABASE_URL"},
    "api": {"HBGW_DATABASE_URL", "HBGW_REDIS_URL", "HBGW_ADMIN_TOKEN", "HBGW_API_TOKENS"},
    "beat": {
        "HBGW_DATABASE_URL", "HBGW_REDIS_URL", "HBGW_ALERT_WEBHOOK", "HBGW_ALERT_WEBHOOK_SECRET",
    },
    "worker-1": {"HBGW_DATABASE_URL", "HBGW_REDIS_URL", "HBGW_OPENAI_API_KEY"},
    "flower": {"HBGW_REDIS_URL", "HBGW_FLOWER_PASSWORD"},
}  # fmt: skip


def test_each_role_gets_only_the_secrets_it_uses(tmp_path: Path) -> None:
    # Issue 15: every role, Flower included, got the database URL and the model key.
    services = _services(tmp_path, HBGW_ALERT_WEBHOOK="https://hooks.example/T/x")
    got = {role: set(services[role]["environment"]) & SECRET_NAMES for role in ROLE_SECRETS}
    assert got == ROLE_SECRETS
    assert services["beat"]["environment"]["HBGW_ALERT_WEBHOOK"] == "https://hooks.example/T/x"


def test_redis_wants_a_password_that_every_role_uses(tmp_path: Path) -> None:
    # Issue 15: compose's Redis had no AUTH: any container on the network could rewrite it.
    services = _services(tmp_path)
    redis = services["redis"]
    command = " ".join(redis["command"])
    assert '--requirepass "$$REDIS_PASSWORD"' in command and "ci-redis-password" not in command
    assert redis["environment"]["REDIS_PASSWORD"] == "ci-redis-password"
    assert "PONG" in " ".join(redis["healthcheck"]["test"])  # NOAUTH must not count as healthy
    for role in ("api", "beat", "worker-1", "flower"):
        url = services[role]["environment"]["HBGW_REDIS_URL"]
        assert url == "redis://:ci-redis-password@redis:6379/0", role
    env, env_file = compose_env(
        tmp_path, **{k: v for k, v in SECRETS.items() if k != "REDIS_PASSWORD"}
    )
    done = run(
        [compose_binary(), *env_file, "-f", ROOT / "docker-compose.yml", "config", "--quiet"],
        env=env,
    )
    assert done.returncode != 0 and "set REDIS_PASSWORD" in done.stderr
