"""The `gateway` fixture: a deployment on real Redis, SQLite and in-process Celery workers."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from support.harness import Gateway, gateway_settings


@pytest.fixture
def gateway(tmp_path: Path, redis_url: str, redis_ns: str) -> Iterator[Gateway]:
    gw = Gateway(gateway_settings(tmp_path, redis_url, redis_ns), redis_url)
    yield gw
    gw.close()
