"""Issue 16's end-to-end goals, from the e2e and redis_latency results (bench/goals.py's rows).

Every ratio is within one run: ours and celery-redbeat (or the direct and the delayed
deployment) ran interleaved on the same machine, so a loaded machine weighs on both. Each
measured cell names the load average (1 min) at the end of the phases it compares, when the
result has it.
"""

from __future__ import annotations

from typing import Any

from bench.goal_row import Row

Doc = dict[str, Any]
SYSTEM = "ours-postgresql"  # the goals are on PostgreSQL
REDBEAT = "redbeat"
RATES = (100, 200)
CPU_RATIO = 2.0
DELIVERED_RATIO = 1.0
P99_LIMIT_S = 1.0


def _by_rate(doc: Doc, system: str) -> dict[int, Doc]:
    return {p["offered_per_s"]: p for p in doc["systems"].get(system, [])}


def _load(*phases: Doc) -> str:
    loads = [f"{p['loadavg_1m']:g}" for p in phases if p.get("loadavg_1m") is not None]
    return f"; load {'/'.join(loads)}" if loads else ""


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f} ms"


def issue16_rows(doc: Doc) -> list[Row]:
    ours, theirs = _by_rate(doc, SYSTEM), _by_rate(doc, REDBEAT)
    rows = []
    for rate in RATES:
        cpu_goal = (
            f"workers' CPU per heartbeat fire ≤ {CPU_RATIO:g}× celery-redbeat's empty task "
            f"({rate}/s, PostgreSQL)"
        )
        ok, rb = ours.get(rate), theirs.get(rate)
        if ok is None or rb is None:
            missing = "—" if ok is None and rb is None else f"not run at {rate}/s"
            rows.append(Row(cpu_goal, missing, None))
            rows.append(Row(_delivered_goal(rate), missing, None))
            continue
        mine, other = ok["cpu_s_per_fire"]["workers"], rb["cpu_s_per_fire"]["workers"]
        if mine is None or not other:
            rows.append(Row(cpu_goal, "no fires", None))
        else:
            cpu = mine / other
            rows.append(
                Row(cpu_goal, f"{cpu:.1f}× ({_ms(mine)} vs {_ms(other)}{_load(ok, rb)})", cpu <= 2)
            )
        delivered = ok["delivered_per_s"] / rb["delivered_per_s"] if rb["delivered_per_s"] else 0
        p99, rb_p99 = ok["lag_s"]["p99"], rb["lag_s"]["p99"]
        measured = (
            f"{delivered:.2f}× ({ok['delivered_per_s']:g}/s vs {rb['delivered_per_s']:g}/s), "
            f"p99 {_s(p99)} (redbeat {_s(rb_p99)}){_load(ok, rb)}"
        )
        met = delivered >= DELIVERED_RATIO and p99 is not None and p99 < P99_LIMIT_S
        rows.append(Row(_delivered_goal(rate), measured, met))
    crossings = doc.get("p99_passes_1s_at_offered", {})
    for system in sorted(doc["systems"]):
        offered = [p["offered_per_s"] for p in doc["systems"][system]]
        passes = crossings.get(system)
        measured = (
            f"at {passes}/s offered"
            if passes
            else f"not passed up to {max(offered)}/s offered"
            if offered
            else "—"
        )
        rows.append(
            Row(f"offered rate where p99 lag passes 1 s ({system}; reported)", measured, None)
        )
    return rows


def _delivered_goal(rate: int) -> str:
    return (
        f"delivered ≥ {DELIVERED_RATIO:.1f}× celery-redbeat's at {rate}/s offered, p99 due→agent "
        f"start < 1 s (PostgreSQL)"
    )


def _s(value: float | None) -> str:
    return "—" if value is None else f"{value:.2f} s"


def latency_rows(doc: Doc) -> list[Row]:
    delay_ms = doc["parameters"]["delay_s_each_way"] * 1000
    goal = (
        f"+{delay_ms:.0f} ms of Redis latency each way costs at most half the throughput "
        f"({doc['parameters']['database']})"
    )
    best, ratio = doc["throughput_per_s"], doc["ratio"]
    if ratio is None:
        return [Row(goal, "—", None)]
    phases = [p for runs in doc["systems"].values() for p in runs]
    at = doc.get("ratio_at_offered", {}).get("+150ms", {})
    by_rate = ", ".join(f"{k}/s: {v:.2f}×" for k, v in at.items())
    measured = f"{ratio:.2f}× ({best['+150ms']:g}/s with, {best['direct']:g}/s without; {by_rate}"
    if doc.get("workers_only_ratio") is not None:
        measured += (
            f"; workers only behind it: {doc['workers_only_ratio']:.2f}× "
            f"({best['+150ms-workers-only']:g}/s)"
        )
    if doc.get("workers_only_no_hold_ratio") is not None:
        measured += (
            f"; the same without beat's hold (HBGW_BEAT_HOLD=0): "
            f"{doc['workers_only_no_hold_ratio']:.2f}× ({best['+150ms-workers-only-no-hold']:g}/s)"
        )
    if doc.get("no_task_events_ratio") is not None:
        measured += (
            f"; with HBGW_TASK_EVENTS=false: {doc['no_task_events_ratio']:.2f}× "
            f"({best['+150ms-no-task-events']:g}/s)"
        )
    interval = doc["parameters"].get("interval_s", 1)
    measured += f"; a fire every {interval} s per session{_load(*phases)})"
    return [Row(goal, measured, ratio >= doc["goal_ratio"])]
