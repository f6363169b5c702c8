"""The start-up benchmark, once each and bounded: it runs and reports; no time is asserted."""

from __future__ import annotations

from pathlib import Path

from support.sql_fixtures import PG_URL, require_postgres

from bench.cli_start import measure
from bench.goals import cli_start_rows


def test_the_benchmark_measures_each_command_and_fills_the_goals(
    tmp_path: Path, redis_url: str
) -> None:
    require_postgres()
    result = measure(tmp_path, redis_url, repeats=1, pg_url=PG_URL)
    found = result["commands"]
    assert set(found) == {
        "help",
        "stamp_dir",
        "stamp_redis",
        "heartbeat_status_json",
        "heartbeat_status_json_redis",
        "heartbeat_status_json_postgres",
    }
    for timing in found.values():
        assert timing["wall_s"]["median"] > 0 and timing["modules"] > 0
        assert timing["loadavg_1m"] >= 0
    # The import graph, not a time: no redis-py, SQLAlchemy, pydantic or Typer on the short paths.
    for name in set(found) - {"help"}:
        assert found[name]["heavy"] == [], name
    rows = cli_start_rows(result)
    assert len(rows) == 5 and all(row.met is not None for row in rows)
