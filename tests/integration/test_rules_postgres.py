"""The worker path on PostgreSQL: the same turns, the production database."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.harness import Gateway, gateway_settings
from support.scenarios import assert_invariants, busy_with_slow_turn, fire_pending

from hbgw.core.clock import utcnow
from hbgw.sessions.db import make_engine, upgrade
from hbgw.sessions.states import RunState

pytestmark = pytest.mark.postgres


def test_deferred_and_coalesced_fires_on_postgres(
    tmp_path: Path, redis_url: str, redis_ns: str, pg_schema_url: str
) -> None:
    engine = make_engine(pg_schema_url)
    upgrade(engine)
    engine.dispose()
    settings = gateway_settings(tmp_path, redis_url, redis_ns, database_url=pg_schema_url)
    gw = Gateway(settings, redis_url)
    try:
        with gw.worker("w1"):
            late, busy = gw.session(chat="CLATE"), gw.session(chat="CBUSY")
            gw.due_now(late, missed=3)
            busy_with_slow_turn(gw, busy)
            gw.due_now(busy)
            fire_pending(gw, busy)
            [coalesced] = gw.final_runs(late)
            [deferred] = gw.final_runs(busy)
        assert coalesced.missed == 3 and coalesced.state == RunState.COMPLETED
        assert deferred.deferred and deferred.state == RunState.COMPLETED
        assert gw.store.heartbeats.heartbeat_status(late, utcnow()).to_json()["fire_count"] == 1
        assert_invariants(gw)
    finally:
        gw.close()
