"""Size a deployment for 1M, 10M and 100M sessions from measured costs per fire.

``python -m bench.sizing [RESULTS_DIR]`` prints the plan as Markdown; the runner runs it last
(``python -m bench quick|full``) and writes ``bench/results/sizing-*.json``. ``plan`` is a pure
function of the costs per fire and the assumptions; ``costs_from_results`` reads the costs from
the newest results (workers_scaling, replicas, memory, and ledger_size when it exists), falling
back to ``DEFAULTS`` figure by figure and saying which it took, so the table follows the code as
the measured costs change.

The model: every part runs at ``utilisation`` of what it can do, so it has headroom for a
failover and for bursts; a part's need in cores is fires/s × its CPU seconds per fire ÷ that.
Beat, workers and each Redis are one process per core (Python's GIL, Redis's single thread).
"""

from __future__ import annotations

import math
import sys
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from bench.context import BenchContext, Result
from bench.latest import RESULTS, newest

NAME = "sizing"
SIZES = (1_000_000, 10_000_000, 100_000_000)
GIB = 1024**3


@dataclass(frozen=True)
class Costs:
    """What one fire costs each part (seconds of CPU, commands, bytes, rows)."""

    beat_cpu_s: float  # claim, group, publish (the batched path; idle ticks are not per fire)
    worker_cpu_s: float  # admission, turn (echo agent), delivery, ledger writes
    redis_cpu_s: float  # the state's Redis server
    redis_commands: float
    redis_bytes: float  # in and out
    broker_cpu_s: float  # the broker's Redis server (HBGW_BROKER_URL)
    broker_messages: float  # Celery messages published (LPUSH)
    sql_transactions: float
    sql_tuples_written: float  # inserted + updated + deleted
    sql_cpu_s: float  # PostgreSQL backends
    sql_bytes_stored: float  # ledger rows a fire leaves, indexes included
    redis_bytes_per_session: float  # an idle scheduled session
    sources: dict[str, str] = field(default_factory=dict, compare=False)


# Used only for a figure no result has: the e2e and replicas figures of docs/benchmarks.md
# (2 cores, PostgreSQL, November 2026). Each is named as a default in the plan's sources.
DEFAULTS = Costs(
    beat_cpu_s=1 / 145_000,
    worker_cpu_s=0.025,
    redis_cpu_s=0.001,
    redis_commands=50.0,
    redis_bytes=7_000.0,
    broker_cpu_s=0.0005,
    broker_messages=1.0,
    sql_transactions=5.0,
    sql_tuples_written=8.0,
    sql_cpu_s=0.004,
    sql_bytes_stored=1_500.0,
    redis_bytes_per_session=146.0,
)


@dataclass(frozen=True)
class Assumptions:
    heartbeat_s: int = 300
    utilisation: float = 0.5  # of each part's capacity, the rest headroom
    worker_cores_per_host: int = 16
    pg_cores_per_primary: int = 64  # a large single host; past it the SQL is split
    pg_transactions_per_primary: int = 50_000  # commits/s one primary's WAL takes (not measured)
    redis_node_memory_gib: float = 25.0  # dataset per Redis node, at ``utilisation``
    broker_cores_per_node: int = 4  # a RabbitMQ node, when one Redis broker is not enough
    retention_days: int = 7
    partition_days: int = 1
    partitions_ahead: int = 4  # 0017: three days ahead and a default partition per table
    partitioned_tables: int = 2  # the ledger and the messages
    min_shards: int = 16  # HBGW_DUE_SHARDS' default
    min_beats: int = 2  # one to take over
    restore_interval_s: int = 300  # HBGW_RESTORE_INTERVAL as docs/operations.md advises at scale


def _pow2(n: float) -> int:
    return 1 << max(0, math.ceil(math.log2(max(1.0, n))))


def _units(load: float, per_unit: float) -> int:
    return max(1, math.ceil(load / per_unit - 1e-9))


def size_one(sessions: int, c: Costs, a: Assumptions) -> dict[str, Any]:
    """The parts one deployment of ``sessions`` needs, and the part that needs the most cores."""
    fires = sessions / a.heartbeat_s
    u = a.utilisation
    beats = max(a.min_beats, _units(fires * c.beat_cpu_s, u))
    workers = _units(fires * c.worker_cpu_s, u)
    state_cpu = fires * c.redis_cpu_s
    state_memory = sessions * c.redis_bytes_per_session / GIB
    primaries = max(_units(state_cpu, u), _units(state_memory, a.redis_node_memory_gib * u))
    broker_cpu = fires * c.broker_cpu_s
    one_redis_broker = broker_cpu <= u
    broker_nodes = (
        1 if one_redis_broker else max(3, _units(broker_cpu, a.broker_cores_per_node * u))
    )
    sql_cores = fires * c.sql_cpu_s / u
    pg_primaries = max(
        _units(sql_cores, a.pg_cores_per_primary),
        _units(fires * c.sql_transactions, a.pg_transactions_per_primary),
    )
    per_table = math.ceil(a.retention_days / a.partition_days) + a.partitions_ahead
    cores = {
        "workers": workers,
        "SQL": math.ceil(sql_cores),
        "beat": beats,
        "Redis state": primaries,
        "broker": math.ceil(broker_cpu / u),
    }
    return {
        "sessions": sessions,
        "fires_per_s": round(fires, 1),
        "beats": beats,
        "shards": _pow2(max(a.min_shards, 4 * beats, 4 * primaries)),
        "redis_primaries": primaries,
        "redis_nodes": primaries * 2,  # a replica each
        "redis_cluster": primaries > 1,
        "redis_state_gib": round(state_memory, 2),
        "redis_commands_per_s": round(fires * c.redis_commands),
        "redis_mb_per_s": round(fires * c.redis_bytes / 1e6, 1),
        "broker": "one Redis" if one_redis_broker else f"RabbitMQ, {broker_nodes} nodes",
        "broker_nodes": broker_nodes,
        "broker_messages_per_s": round(fires * c.broker_messages),
        "workers": workers,
        "worker_hosts": _units(workers, a.worker_cores_per_host),
        "pg_primaries": pg_primaries,
        "pg_cores": math.ceil(sql_cores),
        "pg_partitions": per_table * a.partitioned_tables * pg_primaries,
        "sql_transactions_per_s": round(fires * c.sql_transactions),
        "sql_rows_written_per_s": round(fires * c.sql_tuples_written),
        "sql_restore_rows_read_per_s": round(sessions / a.restore_interval_s),
        "sql_gb_per_day": round(fires * 86_400 * c.sql_bytes_stored / 1e9, 1),
        "sql_gb_retained": round(fires * 86_400 * c.sql_bytes_stored * a.retention_days / 1e9),
        "cores": cores,
        "limit": max(cores, key=lambda k: cores[k]),
    }


def plan(
    c: Costs, a: Assumptions = Assumptions(), sizes: tuple[int, ...] = SIZES
) -> list[dict[str, Any]]:
    """Each size's deployment, with what changed from the size before it."""
    out: list[dict[str, Any]] = []
    for sessions in sizes:
        row = size_one(sessions, c, a)
        row["changes"] = changes(out[-1] if out else None, row)
        out.append(row)
    return out


def changes(before: dict[str, Any] | None, after: dict[str, Any]) -> list[str]:
    """What a deployment growing from ``before`` to ``after`` must change, in words."""
    said = []
    if after["redis_cluster"] and not (before and before["redis_cluster"]):
        said.append(f"the state moves to a Redis Cluster ({after['redis_primaries']} primaries)")
    if after["broker_nodes"] > 1 and not (before and before["broker_nodes"] > 1):
        said.append(f"the broker moves off Redis to RabbitMQ ({after['broker_nodes']} nodes)")
    if after["pg_primaries"] > 1 and not (before and before["pg_primaries"] > 1):
        said.append(f"the SQL splits by session over {after['pg_primaries']} PostgreSQL primaries")
    if before and after["shards"] != before["shards"]:
        said.append(
            f"{after['shards']} due shards (a populated index keeps its count: choose the "
            "largest size's at the start)"
        )
    return said


def _figure(doc: dict[str, Any] | None, *path: str) -> Any:
    for key in path:
        if not isinstance(doc, dict) or key not in doc:
            return None
        doc = doc[key]
    return doc


def _median(values: list[float]) -> float | None:
    values = sorted(v for v in values if v is not None)
    return values[len(values) // 2] if values else None


def _find(doc: Any, key: str) -> float | None:
    """The first number under ``key`` anywhere in ``doc`` (a result whose shape we do not own)."""
    if isinstance(doc, dict):
        if isinstance(doc.get(key), int | float):
            return float(doc[key])
        for value in doc.values():
            if (found := _find(value, key)) is not None:
                return found
    if isinstance(doc, list):
        for value in doc:
            if (found := _find(value, key)) is not None:
                return found
    return None


def costs_from_results(results: Path = RESULTS) -> Costs:
    """The newest measured figure of each cost, else its default (``sources`` says which)."""
    measured: dict[str, tuple[float, str]] = {}
    scaling = newest("workers_scaling", results)
    if scaling:
        stamp = f"workers_scaling {scaling['started_at'][:16]}"
        phases = scaling["result"]["phases"]
        for name in (
            "worker_cpu_s",
            "redis_cpu_s",
            "redis_commands",
            "redis_bytes",
            "broker_cpu_s",
            "broker_messages",
            "sql_transactions",
            "sql_tuples_written",
            "sql_cpu_s",
        ):
            # CPU: what one more fire costs (less the idle processes' rate), when measured
            value = _median([p.get("per_fire_marginal", {}).get(name) for p in phases])
            value = value if value else _median([p["per_fire"].get(name) for p in phases])
            if value is not None:
                measured[name] = (value, stamp)
        if (stored := scaling["result"].get("sql_bytes_per_run")) is not None:
            measured["sql_bytes_stored"] = (float(stored), stamp + " (table sizes)")
    ledger = newest("ledger_size", results)
    if ledger and (stored := _find(ledger["result"], "bytes_per_fire")) is not None:
        measured["sql_bytes_stored"] = (stored, f"ledger_size {ledger['started_at'][:16]}")
    replicas = newest("replicas", results)
    per_cpu = _median(
        [_figure(v, "fires_per_beat_cpu_s_total", "median") for v in _by(replicas, "by_replicas")]
    )
    if replicas and per_cpu:
        measured["beat_cpu_s"] = (1 / per_cpu, f"replicas {replicas['started_at'][:16]}")
    memory = newest("memory", results)
    per_session = _figure(memory, "result", "ours_bytes_per_session", "median")
    if memory is not None and per_session is not None:
        measured["redis_bytes_per_session"] = (per_session, f"memory {memory['started_at'][:16]}")
    return _with(measured)


def _by(payload: dict[str, Any] | None, key: str) -> list[Any]:
    found = _figure(payload, "result", key)
    return list(found.values()) if isinstance(found, dict) else []


def _with(measured: dict[str, tuple[float, str]]) -> Costs:
    values = {name: value for name, (value, _) in measured.items()}
    sources = {name: source for name, (_, source) in measured.items()}
    for name in asdict(DEFAULTS):
        if name != "sources" and name not in sources:
            sources[name] = "default"
    return replace(DEFAULTS, **values, sources=sources)


UNITS = {"_cpu_s": ("µs", 1e6), "_bytes": ("B", 1.0)}


def costs_markdown(c: Costs) -> str:
    """The costs per fire the plan used, each with its source."""
    lines = ["| cost per fire | value | from |", "| --- | --- | --- |"]
    for name, value in asdict(c).items():
        if name == "sources":
            continue
        unit, scale = next(((u, k) for end, (u, k) in UNITS.items() if end in name), ("", 1.0))
        shown = f"{value * scale:,.1f} {unit}" if unit else f"{value:,.2f}"
        lines.append(f"| {name} | {shown} | {c.sources.get(name, 'default')} |")
    return "\n".join(lines)


def markdown(rows: list[dict[str, Any]]) -> str:
    head = [f"{r['sessions'] / 1e6:g}M sessions" for r in rows]
    lines = ["| | " + " | ".join(head) + " |", "| --- |" + " --- |" * len(rows)]
    for label, show in TABLE:
        lines.append(f"| {label} | " + " | ".join(show(r) for r in rows) + " |")
    return "\n".join(lines)


TABLE: list[tuple[str, Any]] = [
    ("fires/s", lambda r: f"{r['fires_per_s']:,.0f}"),
    ("beats (1 core each)", lambda r: str(r["beats"])),
    ("due shards", lambda r: str(r["shards"])),
    ("Redis state", lambda r: _redis(r)),
    ("Redis commands/s, MB/s", lambda r: f"{r['redis_commands_per_s']:,}, {r['redis_mb_per_s']:,}"),
    ("broker", lambda r: f"{r['broker']} ({r['broker_messages_per_s']:,} messages/s)"),
    ("worker processes (hosts)", lambda r: f"{r['workers']:,} ({r['worker_hosts']:,})"),
    ("PostgreSQL primaries (cores)", lambda r: f"{r['pg_primaries']} ({r['pg_cores']:,})"),
    ("SQL transactions/s", lambda r: f"{r['sql_transactions_per_s']:,}"),
    ("SQL rows written/s", lambda r: f"{r['sql_rows_written_per_s']:,}"),
    ("SQL rows read/s by the restore sweep", lambda r: f"{r['sql_restore_rows_read_per_s']:,}"),
    ("ledger GB/day (retained)", lambda r: f"{r['sql_gb_per_day']:,} ({r['sql_gb_retained']:,})"),
    ("partitions", lambda r: str(r["pg_partitions"])),
    ("limit (most cores)", lambda r: f"{r['limit']} ({r['cores'][r['limit']]:,} cores)"),
    ("what changes", lambda r: "; ".join(r["changes"]) or "—"),
]


def _redis(r: dict[str, Any]) -> str:
    kind = "Cluster" if r["redis_cluster"] else "one primary"
    nodes = f"{r['redis_primaries']} primaries, {r['redis_nodes']} nodes"
    return f"{kind}: {nodes} ({r['redis_state_gib']} GiB)"


def run(ctx: BenchContext) -> Result:
    costs = costs_from_results()
    rows = plan(costs)
    print(markdown(rows), flush=True)
    return {"costs": asdict(costs), "assumptions": asdict(Assumptions()), "plan": rows}


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    costs = costs_from_results(Path(args[0]) if args else RESULTS)
    print(costs_markdown(costs) + "\n")
    print(markdown(plan(costs)))


if __name__ == "__main__":
    main()
