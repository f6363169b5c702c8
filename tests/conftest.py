"""Test configuration shared by every test module."""

from __future__ import annotations

import os

# Tests never read the developer's own configuration.
for _name in [n for n in os.environ if n.startswith("HBGW_") and not n.startswith("HBGW_TEST_")]:
    del os.environ[_name]

pytest_plugins = [
    "support.redis_fixtures",
    "support.sql_fixtures",
    "support.gateway_fixtures",
]
