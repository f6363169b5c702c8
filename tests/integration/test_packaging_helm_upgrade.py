"""Helm upgrades (issue 20): every pod carries a checksum of the ConfigMap and of the Secret
keys it reads, so a rotated secret or a changed setting rolls exactly the pods that use it;
every secret setting of the gateway has a key in the chart's Secret."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import SecretStr
from support.packaging_tools import CHART, render

from hbgw.core.settings import Settings

DEFAULT = (CHART / "ci" / "default-values.yaml").read_text()
# Settings that carry credentials without being SecretStr: URLs with a password or a token.
URLS_WITH_CREDENTIALS = {"database_url", "redis_url", "broker_url", "webhook_url"}


def _annotations(extra: str, tmp_path: Path) -> dict[str, dict[str, str]]:
    tmp_path.mkdir()
    values = tmp_path / "values.yaml"
    values.write_text(DEFAULT + extra)
    objects: list[dict[str, Any]] = [o["object"] for o in render(values, tmp_path / "out")]
    pods = {
        o["metadata"]["name"].rsplit("-", 1)[1]: o["spec"]["template"]["metadata"]
        for o in objects
        if o["kind"] == "Deployment"
    }
    return {role: meta.get("annotations", {}) for role, meta in pods.items()}


def test_a_secret_change_rolls_the_pods_that_read_it(tmp_path: Path) -> None:
    before = _annotations("", tmp_path / "a")
    assert set(before) == {"api", "beat", "worker", "flower"}
    for role, pod in before.items():
        assert {"checksum/config", "checksum/secret"} <= set(pod), role
    rotated = _annotations(
        "secrets: {adminToken: rotated-admin, flowerPassword: ci-flower-password}\n",
        tmp_path / "b",
    )
    changed = {r for r in before if before[r]["checksum/secret"] != rotated[r]["checksum/secret"]}
    # The admin token is the API's alone: beat, the workers and Flower keep their pods.
    assert changed == {"api"}
    assert all(before[r]["checksum/config"] == rotated[r]["checksum/config"] for r in before)


def test_a_setting_change_rolls_every_pod(tmp_path: Path) -> None:
    before = _annotations("", tmp_path / "a")
    after = _annotations("config: {HBGW_LOG_LEVEL: DEBUG}\n", tmp_path / "b")
    assert all(before[r]["checksum/config"] != after[r]["checksum/config"] for r in before)
    assert all(before[r]["checksum/secret"] == after[r]["checksum/secret"] for r in before)


def test_every_secret_setting_has_a_key_in_the_chart_secret(tmp_path: Path) -> None:
    secret_settings = {
        name
        for name, field in Settings.model_fields.items()
        if field.annotation is not None and SecretStr in getattr(field.annotation, "__args__", ())
    } | URLS_WITH_CREDENTIALS
    objects = [o["object"] for o in render(CHART / "ci" / "default-values.yaml", tmp_path)]
    (secret,) = [
        o for o in objects if o["kind"] == "Secret" and o["metadata"]["name"].endswith("-secret")
    ]
    keys = set(secret["stringData"])
    assert sorted(f"HBGW_{name.upper()}" for name in secret_settings) == sorted(keys)
