"""The end-to-end benchmark's measurements on tiny data, and one tiny real run (so it cannot rot).

Numbers are never asserted against goals here: only that each function computes what it says.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from bench.context import QUICK, BenchContext
from bench.e2e import Plan, comparisons, run_phases
from bench.e2e_measure import (
    delivered_rate,
    in_window,
    lag_summary,
    lags,
    per_fire,
    rate_where_p99_passes,
    ratio,
    rows_to_fires,
    steady_window,
)
from bench.plots_e2e import lag_plot
from hbgw.core.embedded import EmbeddedRedis

T0 = datetime(2026, 11, 30, 9, 0, tzinfo=UTC)
E0 = T0.timestamp()


def test_ledger_rows_become_fires_and_unstarted_runs_are_left_out() -> None:
    rows = [
        (T0, T0 + timedelta(milliseconds=250)),
        (T0 + timedelta(seconds=1), None),  # reserved, never started
        (None, T0),  # a run without a due time (not a heartbeat fire)
    ]
    assert rows_to_fires(rows) == [(E0, E0 + 0.25)]


def test_the_window_starts_after_the_warm_up_and_holds_starts_only() -> None:
    window = steady_window(E0, warmup=3, length=10)
    assert (window.start, window.end, window.seconds) == (E0 + 3, E0 + 13, 10)
    fires = [(E0, E0 + 2.9), (E0 + 2, E0 + 3.0), (E0 + 5, E0 + 12.99), (E0 + 12, E0 + 13)]
    kept = in_window(fires, window)
    assert kept == [(E0 + 2, E0 + 3.0), (E0 + 5, E0 + 12.99)]
    assert delivered_rate(kept, window) == pytest.approx(0.2)


def test_a_window_needs_a_length() -> None:
    with pytest.raises(ValueError, match="window 0"):
        steady_window(E0, warmup=1, length=0)


def test_lag_is_start_minus_due_and_never_negative() -> None:
    assert lags([(E0, E0 + 1.5), (E0, E0 - 0.001)]) == [1.5, 0.0]


def test_lag_summary_percentiles_from_the_histogram() -> None:
    values = [i / 1000 for i in range(1, 101)]  # 1 ms .. 100 ms
    s = lag_summary(values)
    assert s["count"] == 100
    assert s["p50"] == pytest.approx(0.050, rel=0.01)
    assert s["p95"] == pytest.approx(0.095, rel=0.01)
    assert s["p99"] == pytest.approx(0.099, rel=0.01)
    assert s["max"] == pytest.approx(0.100, rel=0.01)
    assert lag_summary([])["p99"] is None


def test_the_rate_where_p99_passes_a_limit_and_ratios() -> None:
    points = [(100.0, 1.5), (10.0, 0.1), (50.0, None), (200.0, 4.0)]
    assert rate_where_p99_passes(points, 1.0) == 100.0
    assert rate_where_p99_passes([(10.0, 0.2)], 1.0) is None
    assert per_fire(2.0, 400) == 0.005
    assert per_fire(2.0, 0) is None
    assert ratio(3.0, 1.5) == 2.0
    assert ratio(1.0, 0) is None


def _phase(rate: int, delivered: float, p99: float) -> dict[str, object]:
    return {
        "offered_per_s": rate,
        "delivered_per_s": delivered,
        "lag_s": {"p50": p99 / 2, "p99": p99},
        "cpu_s_per_fire": {"beat": 0.001, "workers": 0.009},
    }


def test_comparisons_pair_ours_with_redbeat_at_the_same_rate(tmp_path: Path) -> None:
    results = {
        "ours-sqlite": [_phase(10, 10.0, 0.1), _phase(50, 20.0, 3.0)],
        "redbeat": [_phase(10, 10.0, 0.05)],
    }
    [only] = comparisons(results)
    assert only["offered_per_s"] == 10
    assert only["delivered_ratio"] == 1.0
    assert only["p99_lag_ratio"] == 2.0
    assert lag_plot(results, tmp_path / "lag.png").stat().st_size > 0


@pytest.fixture
def bench_ctx(tmp_path: Path) -> Iterator[BenchContext]:
    # A Redis of its own: the benchmark flushes its databases.
    with EmbeddedRedis(tmp_path / "redis") as server:
        yield BenchContext(QUICK, server.url, tmp_path, None)


def test_a_tiny_end_to_end_run_of_both_systems(bench_ctx: BenchContext) -> None:
    plan = Plan(rates=[5], kinds=["sqlite"], warmup_s=1.0, window_s=2.0, budget_s=100.0)
    results = run_phases(bench_ctx, plan)
    for name in ("ours-sqlite", "redbeat"):
        [phase] = results[name]
        assert phase["sessions"] == 5
        assert phase["fires"] > 0, name
        assert phase["lag_s"]["p99"] is not None
