"""Test configuration shared by every test module."""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator

import pytest
from support.one_name import forbid_old_names

forbid_old_names()

# Tests never read the developer's own configuration.
for _name in [n for n in os.environ if n.startswith("HBGW_") and not n.startswith("HBGW_TEST_")]:
    del os.environ[_name]

pytest_plugins = [
    "support.redis_fixtures",
    "support.sql_fixtures",
    "support.gateway_fixtures",
    "support.cli_fixtures",
    "support.private_redis",
    "support.api_fixtures",
    "support.slack_fixtures",
    "support.rabbitmq",
    "support.sentinel_cluster",
    "support.redis_cluster",
    "support.telegram_fixtures",
    "support.discord_fixtures",
    "support.webhook_fixtures",
]


# A test's folder says what it needs; its marker follows from the folder (`-m unit`, ...).
TIERS = ("unit", "integration", "e2e")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Each test gets its tier's marker, and the slowest tier runs first: on parallel workers
    (`make test`, `--dist loadfile`) a long e2e module started last would run alone at the end
    while the others wait."""
    for item in items:
        tier = item.path.parent.name
        if tier in TIERS:
            item.add_marker(getattr(pytest.mark, tier))
    first = {"e2e": 0, "integration": 1, "unit": 2}
    items.sort(key=lambda item: first.get(item.path.parent.name, 3))


@pytest.fixture(autouse=True)
def _root_logging_restored() -> Iterator[None]:
    """A command run in-process (`hbgw worker`) points the root logger at the test's captured
    stderr; later tests must not log into that closed stream."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)
