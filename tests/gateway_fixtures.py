"""The `gateway` fixture: a deployment on real Redis, SQLite and in-process Celery workers."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from gateway_harness import FAST, Gateway

from core.settings import Settings

AGENT_SCRIPT = Path(__file__).with_name("agent_script.py")


def gateway_settings(
    tmp_path: Path, redis_url: str, namespace: str, **overrides: object
) -> Settings:
    values: dict[str, object] = {
        "home": tmp_path,
        "redis_url": redis_url,
        "namespace": namespace,
        "channel": "file",
        "channel_file": tmp_path / "deliveries.jsonl",
        "agent_log": tmp_path / "agent.jsonl",
        "agent": "command",
        "agent_command": f"{sys.executable} {AGENT_SCRIPT}",
        **FAST,
    }
    values.update(overrides)
    return Settings(**values)  # type: ignore[arg-type]


@pytest.fixture
def gateway(tmp_path: Path, redis_url: str, redis_ns: str) -> Iterator[Gateway]:
    gw = Gateway(gateway_settings(tmp_path, redis_url, redis_ns), redis_url)
    yield gw
    gw.close()
