"""The deployment the worker-scaling benchmark grows, and what it reads from each part.

One `hbgw beat`, workers added one at a time (`hbgw worker`, echo agent, file channel), two
`hbgw api` replicas on free loopback ports, on a PostgreSQL database of its own (created here,
dropped on the way out, so ``pg_stat_database`` counts this deployment's transactions only) or
SQLite when PostgreSQL does not answer; the state in the runner's private Redis and Celery's
broker in a second embedded Redis (``HBGW_BROKER_URL``), so that each server's commands, bytes
and CPU are the state's or the broker's alone. Every process is started here and stopped on the
way out.

The readings (``snapshot``) are cumulative counters: CPU seconds per role (psutil; the
PostgreSQL backends found by the database name in their process title), Redis commands, bytes
and CPU (``INFO``), and PostgreSQL's transactions and tuples. A phase takes two and subtracts.
"""

from __future__ import annotations

import socket
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil
import redis
import sqlalchemy as sa

from bench.context import BenchContext
from bench.e2e_systems import Ours, migrate, redis_db_url
from hbgw.core.embedded import EmbeddedRedis
from hbgw.core.errors import HbgwError
from hbgw.core.settings import Settings
from hbgw.procs import settings_env, spawn_hbgw, stop_all
from hbgw.sessions.store import Store
from hbgw.state.connection import connect
from hbgw.state.runtime import Runtime

REDIS_DB = 3  # beside the e2e deployments' databases
CONCURRENCY = 8
READY_TIMEOUT = 120.0
ADMIN_TOKEN = "bench-admin-token-0123456789"
API_REPLICAS = 2
PG_STATS = ("xact_commit", "xact_rollback", "tup_inserted", "tup_updated", "tup_deleted")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@dataclass
class ScalingDeployment(Ours):
    env: dict[str, str] = field(default_factory=dict)
    redis_url: str = ""
    broker_url: str = ""
    pg_admin_url: str | None = None
    pg_database: str | None = None
    api_ports: list[int] = field(default_factory=list)

    def workers(self) -> list[str]:
        return [n for n in self.procs if n.startswith("w")]

    def add_worker(self) -> str:
        name = f"w{len(self.workers()) + 1}"
        args = ["worker", "--name", name, "--concurrency", str(CONCURRENCY)]
        self.procs[name] = spawn_hbgw(args, env=self.env, log=self.logs / f"{name}.log")
        assert self.rt is not None
        rt = self.rt
        wanted = len(self.workers())
        wait_for(lambda: len(rt.registry.live(rt.now_ms())) >= wanted, self, f"worker {name}")
        return name

    def role_cpu(self) -> dict[str, float]:
        """CPU seconds (user + system) so far of each process, by its name (beat, w1, api1...)."""
        out: dict[str, float] = {}
        for name, proc in self.procs.items():
            try:
                t = psutil.Process(proc.pid).cpu_times()
            except psutil.Error:
                continue
            out[name] = t.user + t.system
        return out

    def snapshot(self) -> dict[str, Any]:
        return {
            "at": time.monotonic(),
            "cpu": self.role_cpu(),
            "redis": redis_counters(self.redis_url),
            "broker": redis_counters(self.broker_url),
            "pg": pg_counters(self.pg_admin_url, self.pg_database),
        }


def wait_for(ready: Any, d: Ours, what: str) -> None:
    deadline = time.monotonic() + READY_TIMEOUT
    while not ready():
        d.check_alive()
        if time.monotonic() > deadline:
            raise HbgwError(f"{d.label}: {what} not ready in {READY_TIMEOUT:.0f} s; see {d.logs}.")
        time.sleep(0.1)


def redis_counters(url: str) -> dict[str, Any]:
    """The whole server's counters: this benchmark has the runner's Redis to itself."""
    client = redis.Redis.from_url(url)
    try:
        stats = client.info("stats")
        cpu = client.info("cpu")
        commands = client.info("commandstats")
    finally:
        client.close()
    return {
        "commands": {k.removeprefix("cmdstat_"): v["calls"] for k, v in commands.items()},
        "net_in": stats["total_net_input_bytes"],
        "net_out": stats["total_net_output_bytes"],
        "cpu_s": float(cpu["used_cpu_sys"]) + float(cpu["used_cpu_user"]),
    }


def pg_counters(admin_url: str | None, database: str | None) -> dict[str, Any]:
    """This database's transactions and tuples (``pg_stat_database``, flushed by each backend
    about once a second) and the CPU of its backends (their title names the database)."""
    if admin_url is None or database is None:
        return {}
    engine = sa.create_engine(admin_url)
    try:
        with engine.connect() as conn:
            row = conn.execute(
                sa.text(f"SELECT {', '.join(PG_STATS)} FROM pg_stat_database WHERE datname = :d"),
                {"d": database},
            ).one()
    finally:
        engine.dispose()
    out: dict[str, Any] = {name: float(v) for name, v in zip(PG_STATS, row, strict=True)}
    out["backend_cpu_s"] = pg_backend_cpu(database)
    return out


def pg_backend_cpu(database: str) -> dict[str, float]:
    """CPU seconds of each live PostgreSQL backend serving ``database`` (its title names it),
    by pid: a phase sums the change of every pid alive at its end (a backend that exits in
    between takes its seconds with it, so the figure is a lower bound)."""
    out: dict[str, float] = {}
    for proc in psutil.process_iter(["name", "cmdline"]):
        try:
            title = " ".join(proc.info["cmdline"] or [])
            is_postgres = proc.info["name"] == "postgres" or title.startswith("postgres:")
            if is_postgres and f" {database} " in f" {title} ":
                t = proc.cpu_times()
                out[str(proc.pid)] = t.user + t.system
        except psutil.Error:
            continue
    return out


def table_bytes(admin_url: str, database: str) -> dict[str, dict[str, int]]:
    """Rows and bytes (heap, indexes and TOAST) of each ledger table, after the run."""
    url = sa.make_url(admin_url).set(database=database)
    engine = sa.create_engine(url)
    out: dict[str, dict[str, int]] = {}
    try:
        with engine.connect() as conn:
            for table in ("heartbeat_runs", "messages", "deliveries", "heartbeats", "sessions"):
                exists = conn.execute(sa.text("SELECT to_regclass(:t)"), {"t": table}).scalar()
                if exists is None:
                    continue
                rows = conn.execute(sa.text(f'SELECT count(*) FROM "{table}"')).scalar_one()
                size = conn.execute(
                    sa.text("SELECT pg_total_relation_size(:t)"), {"t": table}
                ).scalar_one()
                out[table] = {"rows": int(rows), "bytes": int(size)}
    finally:
        engine.dispose()
    return out


@contextmanager
def private_database(stack: ExitStack, pg_url: str) -> Iterator[tuple[str, str]]:
    """A fresh database on the server of ``pg_url``, dropped on the way out: (its URL, name)."""
    name = f"bench_scaling_{uuid.uuid4().hex[:10]}"
    admin = sa.create_engine(pg_url, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(sa.text(f'CREATE DATABASE "{name}"'))

    def drop() -> None:
        with admin.connect() as conn:
            conn.execute(sa.text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()

    # DROP DATABASE waits for a checkpoint of the whole server: seconds (7 s measured) when it
    # is busy, after the run's figures are all read. So it finishes in the background; not a
    # daemon thread, so the interpreter waits for it at exit and no database is left behind.
    stack.callback(lambda: threading.Thread(target=drop, name="bench-drop-database").start())
    yield sa.make_url(pg_url).set(database=name).render_as_string(hide_password=False), name


def _settings(home: Path, db_url: str, redis_url: str) -> Settings:
    return Settings(
        home=home,
        database_url=db_url,
        redis_url=redis_url,
        namespace="bench-scaling",
        agent="echo",
        channel="file",
        channel_file=home / "deliveries.jsonl",
        min_interval=1,  # the setting the tests lower; the rule itself is untouched
        log_format="json",
    )


def _start_apis(d: ScalingDeployment) -> None:
    for i in range(1, API_REPLICAS + 1):
        port = free_port()
        args = ["api", "--host", "127.0.0.1", "--port", str(port)]
        d.procs[f"api{i}"] = spawn_hbgw(args, env=d.env, log=d.logs / f"api{i}.log")
        d.api_ports.append(port)
    for port in d.api_ports:
        wait_for(lambda port=port: _answers(port), d, f"the API on {port}")


def _answers(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


@contextmanager
def deployment(ctx: BenchContext) -> Iterator[ScalingDeployment]:
    """beat, one worker and two API replicas, ready; ``add_worker`` grows it."""
    home = ctx.work_dir / f"scaling-{uuid.uuid4().hex[:6]}"
    logs = home / "logs"
    logs.mkdir(parents=True)
    with ExitStack() as stack:
        pg_name = None
        if ctx.pg_url is not None:
            db_url, pg_name = stack.enter_context(private_database(stack, ctx.pg_url))
        else:
            db_url = f"sqlite:///{home / 'bench.sqlite3'}"
        redis_url = redis_db_url(ctx.redis_url, REDIS_DB)
        flusher = redis.Redis.from_url(redis_url)
        flusher.flushdb()
        flusher.close()
        broker = stack.enter_context(EmbeddedRedis(home / "broker-redis"))
        env = settings_env(_settings(home, db_url, redis_url))
        env["HBGW_ADMIN_TOKEN"] = ADMIN_TOKEN
        env["HBGW_BROKER_URL"] = broker.url
        migrate(db_url)
        d = ScalingDeployment("scaling", logs, env=env, redis_url=redis_url, broker_url=broker.url)
        d.pg_admin_url, d.pg_database = ctx.pg_url, pg_name
        stack.callback(lambda: stop_all(list(d.procs.values())))
        d.procs["beat"] = spawn_hbgw(["beat"], env=env, log=logs / "beat.log")
        rt = Runtime(
            _settings(home, db_url, redis_url),
            Store.from_url(db_url),
            connect(redis_url),
            worker="bench-edge",
        )
        stack.callback(rt.close)
        d.rt = rt
        d.add_worker()
        _start_apis(d)
        yield d
