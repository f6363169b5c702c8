"""More workers, two API replicas: fires per worker CPU-second with 1, 2 and 4 worker processes.

One deployment (bench/scaling_rig.py: beat, two API replicas, PostgreSQL in a database of its
own when it answers) grows from 1 to 2 to 4 `hbgw worker` processes. At each size the same
offered rate (sessions with a heartbeat every 5 s) runs a steady window; the fires that
started in it, over the workers' CPU seconds, give **fires per worker CPU-second** (all
workers) and **per busiest worker's CPU-second** (what N workers do when each has a core, which
this 2-core machine cannot give four workers, beat, Redis and PostgreSQL). The same window
gives each part's cost per fire — beat, worker, Redis and PostgreSQL CPU, Redis commands and
bytes, broker messages, SQL transactions and tuples — which bench/sizing.py turns into a plan.
The state and the broker are two Redis servers, so each one's figures are its own. Then both
API replicas serve reads while the fires go on: requests per API CPU-second.
"""

from __future__ import annotations

import http.client
import os
import threading
import time
from dataclasses import asdict, dataclass
from typing import Any

from bench.context import BenchContext, Result
from bench.e2e_measure import delivered_rate, in_window, lag_summary, lags, steady_window
from bench.scaling_rig import ADMIN_TOKEN, ScalingDeployment, deployment, table_bytes

NAME = "workers_scaling"
SETTLE_S = 1.5  # a start in the window is written, and PostgreSQL's stats flushed, by then


@dataclass(frozen=True)
class Plan:
    workers: list[int]
    rate: int  # offered fires per second
    interval_s: int  # each session's heartbeat: rate × interval sessions, spread over owners
    warmup_s: float
    window_s: float
    api_clients: int


def plan_for(ctx: BenchContext) -> Plan:
    if ctx.quick:
        return Plan([1, 2, 4], 30, 5, 3.0, 6.0, 4)
    return Plan([1, 2, 4], 40, 5, 4.0, 12.0, 8)


def _delta(before: dict[str, Any], after: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in after.items():
        if isinstance(value, dict):
            out[key] = _delta(before.get(key, {}), value)
        elif isinstance(value, int | float):
            out[key] = value - before.get(key, 0)
    return out


def _per(value: float, n: int, digits: int = 6) -> float | None:
    return round(value / n, digits) if n else None


def _commands(counters: dict[str, Any]) -> dict[str, float]:
    # INFO is the benchmark's own reading, not the deployment's
    return {k: v for k, v in counters["commands"].items() if v and k != "info"}


def _backend_cpu(pg: dict[str, Any]) -> float:
    """The backends' CPU change, pid by pid (``_delta`` of two readings by pid)."""
    by_pid = pg.get("backend_cpu_s", {})
    return float(sum(by_pid.values())) if isinstance(by_pid, dict) else float(by_pid)


def costs_per_fire(delta: dict[str, Any], fires: int, workers: list[str]) -> dict[str, Any]:
    """Each part's cost per fire from the counters' change over a window with ``fires``."""
    cpu = delta["cpu"]
    state, broker = delta["redis"], delta["broker"]
    commands, broker_commands = _commands(state), _commands(broker)
    pg = delta.get("pg") or {}
    out: dict[str, Any] = {
        "beat_cpu_s": _per(cpu.get("beat", 0.0), fires),
        "worker_cpu_s": _per(sum(cpu.get(w, 0.0) for w in workers), fires),
        "redis_cpu_s": _per(state["cpu_s"], fires),
        "redis_commands": _per(sum(commands.values()), fires, 2),
        "redis_bytes": _per(state["net_in"] + state["net_out"], fires, 1),
        "broker_cpu_s": _per(broker["cpu_s"], fires),
        "broker_commands": _per(sum(broker_commands.values()), fires, 2),
        "broker_bytes": _per(broker["net_in"] + broker["net_out"], fires, 1),
        "broker_messages": _per(broker_commands.get("lpush", 0), fires, 3),
        "redis_commands_by_name": {k: _per(v, fires, 3) for k, v in sorted(commands.items())},
        "broker_commands_by_name": {
            k: _per(v, fires, 3) for k, v in sorted(broker_commands.items())
        },
    }
    if pg:
        out["sql_transactions"] = _per(pg["xact_commit"] + pg["xact_rollback"], fires, 2)
        written = pg["tup_inserted"] + pg["tup_updated"] + pg["tup_deleted"]
        out["sql_tuples_written"] = _per(written, fires, 2)
        out["sql_cpu_s"] = _per(_backend_cpu(pg), fires)
    return out


def idle_cpu_per_s(d: ScalingDeployment, seconds: float) -> dict[str, float]:
    """Each part's CPU seconds per second with no session scheduled: the fixed cost of the
    processes (ticks, polls, liveness), which a fire does not add to."""
    before = d.snapshot()
    time.sleep(seconds)
    delta = _delta(before, d.snapshot())
    cpu = delta["cpu"]
    return {
        "beat_cpu_s": round(cpu.get("beat", 0.0) / seconds, 4),
        "worker_cpu_s": round(sum(cpu.get(w, 0.0) for w in d.workers()) / seconds, 4),
        "redis_cpu_s": round(delta["redis"]["cpu_s"] / seconds, 4),
        "broker_cpu_s": round(delta["broker"]["cpu_s"] / seconds, 4),
        "sql_cpu_s": round(_backend_cpu(delta["pg"]) / seconds, 4),
    }


def marginal(
    per_fire: dict[str, Any], idle: dict[str, float], seconds: float, fires: int
) -> dict[str, float | None]:
    """CPU per fire less the idle rate over the window: what one more fire costs (≥ 0)."""
    out: dict[str, float | None] = {}
    for name, rate in idle.items():
        gross = per_fire.get(name)
        out[name] = (
            None
            if gross is None or not fires
            else max(0.0, round(gross - rate * seconds / fires, 6))
        )
    return out


def measure_phase(d: ScalingDeployment, plan: Plan) -> dict[str, Any]:
    idle = idle_cpu_per_s(d, plan.warmup_s)
    seeded_at = time.time()
    first_due = d.seed(plan.rate * plan.interval_s, plan.interval_s)
    window = steady_window(max(first_due, time.time()), plan.warmup_s, plan.window_s)
    _sleep_until(window.start, d)
    before = d.snapshot()
    load1 = os.getloadavg()[0]
    _sleep_until(window.end, d)
    after = d.snapshot()
    time.sleep(SETTLE_S)
    delta = _delta(before, after)
    delta["pg"] = _delta(before["pg"], d.snapshot()["pg"]) if before["pg"] else {}
    fires = in_window(d.fires(), window)
    n = len(fires)
    workers = d.workers()
    worker_cpu = [delta["cpu"].get(w, 0.0) for w in workers]
    per_fire = costs_per_fire(delta, n, workers)
    return {
        "workers": len(workers),
        "offered_per_s": plan.rate,
        "sessions": plan.rate * plan.interval_s,
        "seed_s": round(time.time() - seeded_at, 2),
        "fires": n,
        "delivered_per_s": round(delivered_rate(fires, window), 2),
        "lag_s": lag_summary(lags(fires)),
        "cpu_s": {k: round(v, 3) for k, v in delta["cpu"].items()},
        "worker_cpu_s": round(sum(worker_cpu), 3),
        "busiest_worker_cpu_s": round(max(worker_cpu), 3),
        "fires_per_worker_cpu_s": _per(n, sum(worker_cpu) or 1, 1) if n else None,
        "fires_per_busiest_worker_cpu_s": _per(n, max(worker_cpu) or 1, 1) if n else None,
        "cores_busy": round(sum(delta["cpu"].values()) / plan.window_s, 2),
        "loadavg_1m": [round(load1, 2), round(os.getloadavg()[0], 2)],
        "per_fire": per_fire,
        "idle_cpu_per_s": idle,
        "per_fire_marginal": marginal(per_fire, idle, plan.window_s, n),
    }


def _sleep_until(epoch: float, d: ScalingDeployment) -> None:
    while (left := epoch - time.time()) > 0:
        d.check_alive()
        time.sleep(min(left, 0.5))


def _api_client(port: int, path: str, stop: threading.Event, out: list[float]) -> None:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    headers = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
    try:
        while not stop.is_set():
            began = time.perf_counter()
            conn.request("GET", path, headers=headers)
            resp = conn.getresponse()
            resp.read()
            if resp.status == 200:
                out.append(time.perf_counter() - began)
    finally:
        conn.close()


def measure_api(d: ScalingDeployment, plan: Plan) -> dict[str, Any]:
    """Both API replicas read heartbeat status (GET …/heartbeat) while the fires go on."""
    sid = sorted(d.sessions)[0]
    path = f"/v1/sessions/{sid}/heartbeat"
    stop = threading.Event()
    done: dict[int, list[float]] = {port: [] for port in d.api_ports}
    threads = [
        threading.Thread(target=_api_client, args=(port, path, stop, done[port]), daemon=True)
        for i in range(plan.api_clients)
        for port in [d.api_ports[i % len(d.api_ports)]]
    ]
    before = d.snapshot()["cpu"]
    for t in threads:
        t.start()
    time.sleep(plan.window_s)
    stop.set()
    after = d.snapshot()["cpu"]
    for t in threads:
        t.join(15)
    replicas = []
    for i, port in enumerate(d.api_ports, start=1):
        cpu = after[f"api{i}"] - before[f"api{i}"]
        latencies = done[port]
        replicas.append(
            {
                "requests": len(latencies),
                "requests_per_s": round(len(latencies) / plan.window_s, 1),
                "cpu_s": round(cpu, 3),
                "requests_per_api_cpu_s": _per(len(latencies), cpu or 1, 1),
                "latency_s": lag_summary(latencies),
            }
        )
    total = sum(r["requests"] for r in replicas)
    api_cpu = sum(r["cpu_s"] for r in replicas)
    return {
        "replicas": replicas,
        "clients": plan.api_clients,
        "requests_per_s": round(total / plan.window_s, 1),
        "requests_per_api_cpu_s": _per(total, api_cpu or 1, 1),
        "loadavg_1m": round(os.getloadavg()[0], 2),
    }


def run_plan(ctx: BenchContext, plan: Plan) -> Result:
    phases: list[dict[str, Any]] = []
    with deployment(ctx) as d:
        for count in plan.workers:
            while len(d.workers()) < count:
                d.add_worker()
            phase = measure_phase(d, plan)
            if count == plan.workers[-1]:
                api = measure_api(d, plan)
            d.retire()
            phases.append(phase)
            print(_line(phase), flush=True)
        stored = (
            table_bytes(d.pg_admin_url, d.pg_database) if d.pg_admin_url and d.pg_database else {}
        )
    one = phases[0]["fires_per_busiest_worker_cpu_s"]
    scaling = {
        str(p["workers"]): round(p["fires_per_busiest_worker_cpu_s"] / one, 2)
        for p in phases
        if one and p["fires_per_busiest_worker_cpu_s"]
    }
    return {
        "parameters": asdict(plan) | {"beats": 1, "api_replicas": 2},
        "store": "postgresql" if ctx.pg_url else "sqlite",
        "cpu_count": os.cpu_count(),
        "phases": phases,
        "busiest_worker_scaling_over_one": scaling,
        "api": api,
        "sql_stored": stored,
        "sql_bytes_per_run": _bytes_per_run(stored),
    }


def _bytes_per_run(stored: dict[str, dict[str, int]]) -> float | None:
    """The ledger's bytes (runs, their deliveries and messages) over its runs: what a fire
    leaves in SQL, indexes included, at this small size (pages part-filled: an upper bound)."""
    runs = stored.get("heartbeat_runs", {}).get("rows", 0)
    if not runs:
        return None
    ledger = ("heartbeat_runs", "deliveries", "messages")
    return round(sum(stored.get(t, {}).get("bytes", 0) for t in ledger) / runs, 1)


def _line(p: dict[str, Any]) -> str:
    return (
        f"  workers_scaling {p['workers']} worker(s): offered {p['offered_per_s']}/s delivered "
        f"{p['delivered_per_s']}/s, {p['fires_per_worker_cpu_s']} fires per worker CPU-s, "
        f"{p['fires_per_busiest_worker_cpu_s']} per busiest worker CPU-s, "
        f"p99 lag {p['lag_s']['p99']} s, load {p['loadavg_1m']}"
    )


def run(ctx: BenchContext) -> Result:
    return run_plan(ctx, plan_for(ctx))


def phases_markdown(result: Result) -> str:
    """The docs' table of one result: a row per worker count, and the API replicas' line."""
    lines = [
        "| workers | load avg 1 min | delivered/s (offered) | p50 / p99 lag | fires per worker "
        "CPU-s: all, busiest | idle workers' CPU/s | marginal worker CPU per fire |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for p in result["phases"]:
        lag, margin = p["lag_s"], p["per_fire_marginal"]["worker_cpu_s"]
        lines.append(
            f"| {p['workers']} | {p['loadavg_1m'][0]:g}–{p['loadavg_1m'][1]:g} "
            f"| {p['delivered_per_s']:g} ({p['offered_per_s']}) | {lag['p50']} / {lag['p99']} s "
            f"| {p['fires_per_worker_cpu_s']:g}, {p['fires_per_busiest_worker_cpu_s']:g} "
            f"| {p['idle_cpu_per_s']['worker_cpu_s']:g} s | {margin * 1000:.1f} ms |"
        )
    api = result["api"]
    each = "; ".join(
        f"{r['requests_per_s']:g}/s, p99 {r['latency_s']['p99']} s" for r in api["replicas"]
    )
    lines.append("")
    lines.append(
        f"API, 2 replicas, {api['clients']} clients, load average {api['loadavg_1m']:g}: "
        f"{api['requests_per_s']:g} requests/s ({each}), "
        f"{api['requests_per_api_cpu_s']:g} requests per API CPU-second."
    )
    return "\n".join(lines)
