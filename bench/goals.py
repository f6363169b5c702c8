"""The issue's goals against the newest result of each benchmark: ``python -m bench.goals``.

Recorded, never asserted: the runner prints this table after a run, and docs/benchmarks.md
shows it. Every figure is a median of the repetitions in the newest JSON of its benchmark.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.goal_row import Row
from bench.goals_e2e import issue16_rows, latency_rows
from bench.latest import RESULTS, newest

Doc = dict[str, Any]
__all__ = ["Row", "markdown", "rows"]


def _median(value: Any) -> float | None:
    return None if value is None else value.get("median")


def claim_rows(doc: Doc) -> list[Row]:
    largest = max(doc["ours"], key=lambda o: o["scheduled"])
    rate = _median(largest["fires_per_s"]) or 0.0
    rows = [
        Row(
            "≥ 100,000 fires/s claimed and published by one beat",
            f"{rate:,.0f}/s at {largest['scheduled']:,} due",
            rate >= 100_000,
        )
    ]
    for ratio in doc["ratios"]:
        same = "" if ratio["same_size"] else f" (redbeat at {ratio['redbeat_scheduled']:,})"
        rows.append(
            Row(
                "≥ 100× celery-redbeat's dispatch rate",
                f"{ratio['ours_over_redbeat']:,.0f}×{same}",
                ratio["ours_over_redbeat"] >= 100,
            )
        )
    return rows


TICK_GOAL = "tick at 1M ≤ 1.5× tick at 1k (1,000 due, restore included)"


def tick_rows(doc: Doc) -> list[Row]:
    ratio = doc["ratios"].get("with_restore_s")
    sizes = doc["ratios"].get("sizes") or []
    if ratio is None or len(sizes) < 2:
        return [Row(TICK_GOAL, "—", None)]
    small, large = (doc["sizes"][0], doc["sizes"][-1])
    measured = (
        f"{ratio}× ({_ms(large['with_restore_s'])} at {sizes[1]:,} vs "
        f"{_ms(small['with_restore_s'])} at {sizes[0]:,})"
    )
    return [
        Row("tick at 1M ≤ 1.5× tick at 1k (1,000 due, restore included)", measured, ratio <= 1.5)
    ]


def _ms(summary: Doc) -> str:
    return f"{summary['median'] * 1000:.0f} ms"


CPU_GOAL = "4 beats ≥ 3× one in claimed fires per beat CPU-second"
BALANCE_GOAL = "shard balance ≥ 0.8 (fewest shards per beat / most)"


def replicas_rows(doc: Doc) -> list[Row]:
    """Per beat CPU-second: N over the busiest beat's CPU seconds (a core per beat, which this
    2-core machine cannot give four beats and Redis); the total fires/s is shown beside it."""
    by = doc["by_replicas"]
    one, four = by.get("1", {}), by.get("4", {})
    per_one = _median(one.get("fires_per_beat_cpu_s"))
    per_four = _median(four.get("fires_per_beat_cpu_s"))
    if not per_one or not per_four:
        cpu = Row(CPU_GOAL, "—", None)
    else:
        ratio = per_four / per_one
        total_one, total_four = _median(one["fires_per_s"]), _median(four["fires_per_s"])
        cpu = Row(
            CPU_GOAL,
            f"{ratio:.2f}× ({per_four:,.0f} vs {per_one:,.0f}/CPU-s of the busiest beat; "
            f"total {total_four:,.0f}/s vs {total_one:,.0f}/s on {doc['cpu_count']} cores)",
            ratio >= 3,
        )
    if "shard_balance" not in doc:
        return [cpu, Row(BALANCE_GOAL, "—", None)]
    splits = "; ".join(
        f"{k} beats {'/'.join(map(str, v['shards_per_beat']))}" for k, v in sorted(by.items())
    )
    balance = Row(
        BALANCE_GOAL,
        f"{doc['shard_balance']:.2f} over {doc.get('due_shards', 16)} shards ({splits})",
        doc["shard_balance"] >= 0.8,
    )
    return [cpu, balance]


def memory_rows(doc: Doc) -> list[Row]:
    ours = _median(doc["ours_bytes_per_session"]) or 0.0
    theirs = _median(doc["redbeat_bytes_per_session"]) or 0.0
    return [
        Row(
            "≤ 200 bytes of Redis per scheduled idle session",
            f"{ours:.0f} B (celery-redbeat {theirs:.0f} B)",
            ours <= 200,
        )
    ]


def e2e_rows(doc: Doc) -> list[Row]:
    rows = []
    for system, runs in sorted(doc["systems"].items()):
        if not system.startswith("ours"):
            continue
        at_goal = [r for r in runs if r["offered_per_s"] >= 500]
        best = max(runs, key=lambda r: r["delivered_per_s"])
        if at_goal:
            p99 = at_goal[0]["lag_s"]["p99"]
            measured, met = f"p99 {p99:.2f} s at 500/s", p99 < 1
        else:
            measured = (
                f"not offered 500/s (saturated): best {best['delivered_per_s']:.0f}/s delivered "
                f"at {best['offered_per_s']}/s offered, p99 {best['lag_s']['p99']:.2f} s"
            )
            met = False
        passes = doc["p99_passes_1s_at_offered"].get(system)
        measured += f"; p99 passes 1 s at {passes}/s offered" if passes else ""
        rows.append(Row(f"p99 lag < 1 s at 500 fires/s end to end ({system})", measured, met))
    return rows + issue16_rows(doc)


def streams_rows(doc: Doc) -> list[Row]:
    n, measured = doc["streams"], doc["idle_sql_per_s"]
    expected = doc.get("expected_sql_per_s", measured)
    per_s = max(measured, expected)  # a window may miss part of the rechecks: the larger
    p99 = doc["get_with_streams_s"]["p99"]
    scaled = "" if n == 1_000 else f" (measured at {n:,} streams; the goal is at 1,000)"
    return [
        Row(
            "1,000 idle event streams cost ≤ 20 SQL queries/s",
            f"{measured:.1f}/s measured, {expected:.1f}/s steady, with {n:,} open{scaled}",
            per_s <= 20 if n >= 1_000 else None,
        ),
        Row(
            "a plain GET's p99 < 100 ms with 1,000 streams open",
            f"{p99 * 1000:.1f} ms with {n:,} open "
            f"(alone: {doc['get_alone_s']['p99'] * 1000:.1f} ms){scaled}",
            p99 < 0.1 if n >= 1_000 else None,
        ),
    ]


def inflight_rows(doc: Doc) -> list[Row]:
    best = max(doc["points"], key=lambda p: p["most_in_flight"])
    goal = doc["goal"]
    return [
        Row(
            f"one worker process holds ≥ {goal['in_flight']} concurrent "
            f"{doc['model_delay_s']:g}-second model calls, ≤ {goal['rss_mb']} MB resident",
            f"{best['most_in_flight']} at once (--turns {best['turns']}, {best['sessions']} due "
            f"together), {best['rss_peak_mb']:.0f} MB, {best['threads_peak']} threads",
            best["most_in_flight"] >= goal["in_flight"] and best["rss_peak_mb"] <= goal["rss_mb"],
        )
    ]


def jitter_rows(doc: Doc) -> list[Row]:
    hourly = doc["every_1h"]
    exact, jitter = hourly["exact"]["largest_burst"], hourly["jitter"]["largest_burst"]
    out = [
        Row(
            f"jitter spreads {doc['heartbeats']:,} hourly heartbeats set in one second",
            f"largest one-second burst {jitter:,} with jitter, {exact:,} exact",
            jitter * 10 <= exact,
        )
    ]
    top = doc.get("jobs", {}).get("cron_top_of_hour")
    if top is None:  # a result from before the jobs' case
        return [*out, Row("(jitter_burst: no cron jobs' case yet)", "—", None)]
    exact, jitter = top["exact"]["largest_burst"], top["jitter"]["largest_burst"]
    return [
        *out,
        Row(
            f"jitter spreads {doc['heartbeats']:,} cron jobs at the top of the hour",
            f"largest one-second burst {jitter:,} with jitter, {exact:,} exact",
            jitter * 10 <= exact,
        ),
    ]


def cli_start_rows(doc: Doc) -> list[Row]:
    """The stamp's goal; the status (main path) beside it, measured, with no goal of its own."""
    goal, found = doc["goal_s"], doc["commands"]
    out = []
    for name, words, has_goal in (
        ("stamp_dir", "hbgw stamp (into the stamp directory)", True),
        ("stamp_redis", "hbgw stamp (into Redis)", True),
        ("heartbeat_status_json", "hbgw heartbeat status --json (main path, for reference)", False),
    ):
        title = f"{words} starts in < {goal:g} s" if has_goal else words
        if name not in found:
            out.append(Row(title, "—", None))
            continue
        wall, cpu = found[name]["wall_s"]["median"], found[name]["cpu_s"]["median"]
        help_wall = found["help"]["wall_s"]["median"]
        load = found[name].get("loadavg_1m")
        measured = (
            f"{wall:.3f} s wall, {cpu:.3f} s CPU, {found[name]['modules']} modules "
            f"(hbgw --help {help_wall:.3f} s{'' if load is None else f'; load {load:g}'})"
        )
        out.append(Row(title, measured, wall < goal if has_goal else None))
    return out


def grammar_rows(doc: Doc) -> list[Row]:
    """Issue 29: the slowest shape of a 64 kB line, read whole (the prompt limit raised)."""
    worst, goal = doc["worst_64k_ms"], doc["goal_ms"]
    before = doc["before_ms"]["_MANGLED_INTERVAL"]
    largest = max(before, key=int)
    measured = (
        f"{worst:.2f} ms for the slowest shape (the pattern it replaced: {before[largest]:,.0f} ms "
        f"at {int(largest) // 1024}k; load {doc['loadavg_1m']:g})"
    )
    return [
        Row(f"a 64 kB /heartbeat line of any shape parses in < {goal:g} ms", measured, worst < goal)
    ]


WORKERS_GOAL = "4 workers ≥ 3× one in fires per worker CPU-second (busiest worker)"


def workers_scaling_rows(doc: Doc) -> list[Row]:
    """Like the beats' row: a core per worker is what more hosts give; the fires per CPU-second
    of all workers (the cost of a fire) and the load average are shown beside it."""
    by = {p["workers"]: p for p in doc["phases"]}
    one, four = by.get(1), by.get(4)
    if not one or not four or not one["fires_per_busiest_worker_cpu_s"]:
        return [Row(WORKERS_GOAL, "—", None)]
    ratio = four["fires_per_busiest_worker_cpu_s"] / one["fires_per_busiest_worker_cpu_s"]
    loads = "/".join(f"{p['loadavg_1m'][0]:g}" for p in doc["phases"])
    measured = (
        f"{ratio:.2f}× ({four['fires_per_busiest_worker_cpu_s']:,.0f} vs "
        f"{one['fires_per_busiest_worker_cpu_s']:,.0f}; all workers "
        f"{four['fires_per_worker_cpu_s']:,.0f} vs {one['fires_per_worker_cpu_s']:,.0f} "
        f"per CPU-s; load {loads})"
    )
    return [Row(WORKERS_GOAL, measured, ratio >= 3)]


def sizing_rows(doc: Doc) -> list[Row]:
    sources = doc["costs"]["sources"]
    defaults = sorted(k for k, v in sources.items() if v == "default")
    largest = doc["plan"][-1]
    measured = (
        f"{len(sources) - len(defaults)} of {len(sources)} costs measured"
        + (f" (defaults: {', '.join(defaults)})" if defaults else "")
        + f"; 100M limited by {largest['limit']} ({largest['cores'][largest['limit']]:,} cores)"
    )
    return [Row("a plan for 100M sessions from measured costs per fire", measured, not defaults)]


ROWS: dict[str, Callable[[Doc], list[Row]]] = {
    "claim": claim_rows,
    "tick": tick_rows,
    "replicas": replicas_rows,
    "memory": memory_rows,
    "e2e": e2e_rows,
    "redis_latency": latency_rows,
    "streams": streams_rows,
    "inflight": inflight_rows,
    "jitter_burst": jitter_rows,
    "cli_start": cli_start_rows,
    "grammar_parse": grammar_rows,
    "workers_scaling": workers_scaling_rows,
    "sizing": sizing_rows,
}


def rows(results: Path = RESULTS) -> list[Row]:
    out: list[Row] = []
    for name, make in ROWS.items():
        payload = newest(name, results)
        out += (
            make(payload["result"])
            if payload is not None
            else [Row(f"({name}: no result yet)", "—", None)]
        )
    return out


def markdown(found: list[Row]) -> str:
    mark = {True: "met", False: "**not met**", None: "—"}
    lines = ["| goal | measured | |", "| --- | --- | --- |"]
    lines += [f"| {r.goal} | {r.measured} | {mark[r.met]} |" for r in found]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    results = Path(args[0]) if args else RESULTS
    print(markdown(rows(results)))


if __name__ == "__main__":
    main()
