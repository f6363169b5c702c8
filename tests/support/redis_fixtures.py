"""Redis fixtures: a real server for every test, never a mock.

``redis_url`` (session): ``HBGW_TEST_REDIS_URL`` if set, else a local Redis on 6379 if it answers
quickly, else an embedded server started once for the session. Under pytest-xdist each worker
process uses its own database number, because workers sharing one database fail at teardown.

``redis_client``, ``redis_ns`` and ``keys`` (function): a client, a namespace unique to the test
whose keys are deleted afterwards, and its ``Keys``. Nothing here flushes a database.
"""

from __future__ import annotations

import os
import re
import uuid
from collections.abc import Iterator
from urllib.parse import urlsplit, urlunsplit

import pytest
import redis

from hbgw.core.embedded import EmbeddedRedis
from hbgw.state.connection import connect
from hbgw.state.keys import Keys

LOCAL_REDIS = "redis://127.0.0.1:6379/0"
# Databases 1..15 of a default server go to xdist workers; db 0 is left to plain runs.
_XDIST_DATABASES = 15


def redis_answers(url: str, timeout: float = 0.5) -> bool:
    client = redis.Redis.from_url(url, socket_timeout=timeout, socket_connect_timeout=timeout)
    try:
        return bool(client.ping())
    except (redis.RedisError, OSError):
        return False
    finally:
        client.close()


def _xdist_db() -> int | None:
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    match = re.fullmatch(r"gw(\d+)", worker)
    return None if match is None else 1 + int(match.group(1)) % _XDIST_DATABASES


def _with_db(url: str, db: int) -> str:
    parts = urlsplit(url)
    return urlunsplit(parts._replace(path=f"/{db}"))


@pytest.fixture(scope="session")
def redis_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    embedded: EmbeddedRedis | None = None
    url = os.environ.get("HBGW_TEST_REDIS_URL")
    if not url:
        if redis_answers(LOCAL_REDIS):
            url = LOCAL_REDIS
        else:
            embedded = EmbeddedRedis(tmp_path_factory.mktemp("embedded-redis"))
            url = embedded.start()
    db = _xdist_db()
    if db is not None:
        url = _with_db(url, db)
    try:
        yield url
    finally:
        if embedded is not None:
            embedded.stop()


@pytest.fixture
def redis_client(redis_url: str) -> Iterator[redis.Redis]:
    client = connect(redis_url)
    try:
        yield client
    finally:
        client.close()


@pytest.fixture
def redis_ns(redis_client: redis.Redis) -> Iterator[str]:
    namespace = f"t-{uuid.uuid4().hex[:8]}"
    try:
        yield namespace
    finally:
        stale = list(redis_client.scan_iter(match=Keys(namespace).match_all(), count=500))
        for start in range(0, len(stale), 500):
            redis_client.unlink(*stale[start : start + 500])


@pytest.fixture
def keys(redis_ns: str) -> Keys:
    return Keys(redis_ns)
