"""The SQL cost of the fire path: transactions per admission and per heartbeat turn, counted
on real Redis and real SQL (SQLite and PostgreSQL). Counts, never times: a regression that adds
a round trip to every fire fails here."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.fire_path import fire_path_gateway
from support.scenarios import assert_invariants

from sessions.db import make_engine, upgrade
from sessions.states import RunState


def _one_fire(tmp_path: Path, redis_url: str, redis_ns: str, **overrides: object) -> None:
    with fire_path_gateway(tmp_path, redis_url, redis_ns, **overrides) as (gw, path):
        sid = gw.session()
        gw.due_now(sid)
        path.fire(sid)  # warm: the first turn of a process loads what later ones reuse
        other = gw.session(chat="C2")
        gw.due_now(other)
        cost = path.fire(other)
        [run] = gw.runs(other)
        assert run.state == RunState.COMPLETED
        assert_invariants(gw)
    print(
        f"admission: {cost.admission.transactions} tx {cost.admission.statements} stmt; "
        f"turn: {cost.turn.transactions} tx {cost.turn.statements} stmt"
    )
    print("\n".join(cost.turn.lines))


def test_sql_round_trips_per_fire_on_sqlite(tmp_path: Path, redis_url: str, redis_ns: str) -> None:
    _one_fire(tmp_path, redis_url, redis_ns)


@pytest.mark.postgres
def test_sql_round_trips_per_fire_on_postgres(
    tmp_path: Path, redis_url: str, redis_ns: str, pg_schema_url: str
) -> None:
    engine = make_engine(pg_schema_url)
    upgrade(engine)
    engine.dispose()
    _one_fire(tmp_path, redis_url, redis_ns, database_url=pg_schema_url)
