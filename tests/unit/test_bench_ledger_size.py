"""Smoke test of the ledger-size benchmark at a tiny size on PostgreSQL: it runs, every fire
writes its rows (a run, its delivery record, a prompt and a reply), and retention clears them.

Nothing is compared here (the numbers come from ``python -m bench``)."""

from __future__ import annotations

import pytest
from support.sql_fixtures import PG_URL, require_postgres

from bench import ledger_size


@pytest.mark.postgres
def test_the_ledger_size_benchmark_measures_rows_bytes_and_retention() -> None:
    require_postgres()
    result = ledger_size.measure(PG_URL, sessions=3, fires=12)
    tables = result["tables"]
    assert tables["heartbeat_runs"]["rows_per_fire"] == tables["deliveries"]["rows_per_fire"] == 1
    assert tables["messages"]["rows_per_fire"] == 2
    # A plain table's size and a partitioned one's (summed over its partitions) both count.
    for table in ("heartbeat_runs", "deliveries", "messages"):
        assert tables[table]["bytes_per_fire"] > 0, table
    # begin, delivering, finish (issue 16: the claim, reservation, re-check and start are one)
    assert result["bytes_per_fire"] > 0 and result["transactions_per_fire"] >= 3
    assert result["fleet"]["fires_per_second"] == pytest.approx(1000 / 300, abs=0.01)
    assert result["retention"]["runs_deleted"] == 11  # the newest run stays: ids only grow
