"""The two deployments the end-to-end benchmark drives, each one beat and two workers.

``ours``: the schema (made by `hbgw migrate`'s function), `hbgw beat`, two `hbgw worker`s with
the echo agent and the file channel, on SQLite (a file in the work dir) or PostgreSQL (a fresh
schema, dropped afterwards).
``redbeat``: `celery beat` with redbeat's scheduler and two `celery worker`s (bench/redbeat_e2e.py).
Both on the bench's private Redis, in different databases. Every process is started here and
stopped on the way out (try/finally through an ExitStack), whatever happens.
"""

from __future__ import annotations

import os
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import quote, urlsplit

import psutil
import redis
import sqlalchemy as sa
from sqlalchemy.orm import Session

from bench import redbeat_e2e
from bench.context import BenchContext
from bench.e2e_measure import Fire, rows_to_fires
from hbgw.core.clock import from_ms, to_ms, utcnow
from hbgw.core.errors import HbgwError
from hbgw.core.settings import Settings
from hbgw.procs import settings_env, spawn_hbgw, spawn_module, stop_all
from hbgw.sessions.db import make_engine, upgrade
from hbgw.sessions.grammar import IntervalSchedule
from hbgw.sessions.models import RunRow
from hbgw.sessions.store import Store
from hbgw.state.connection import connect
from hbgw.state.runtime import Runtime

# A Redis database each: the deployments live side by side (idle between their phases), and
# each flushes its own at the start.
OURS_DB = {"sqlite": 0, "postgresql": 2}
REDBEAT_DB = 1
WORKERS = ("w1", "w2")
CONCURRENCY = 8  # hbgw worker's default; the redbeat workers get the same threads
READY_TIMEOUT = 90.0  # three Python processes starting on a busy two-core machine
SEED_SECONDS_PER_SESSION = 0.01  # two SQL transactions and a Redis write


def redis_db_url(url: str, db: int) -> str:
    return urlsplit(url)._replace(path=f"/{db}").geturl()


def _flush(url: str) -> None:
    client = redis.Redis.from_url(url)
    try:
        client.flushdb()
    finally:
        client.close()


@dataclass
class Deployment:
    label: str
    logs: Path
    procs: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)

    def pids(self) -> dict[str, int]:
        return {name: proc.pid for name, proc in self.procs.items()}

    def cpu(self) -> dict[str, float]:
        """CPU seconds (user + system) so far: beat's, and the workers' together."""
        out = {"beat": 0.0, "workers": 0.0}
        for name, proc in self.procs.items():
            try:
                times = psutil.Process(proc.pid).cpu_times()
            except psutil.Error:
                continue
            out["beat" if name == "beat" else "workers"] += times.user + times.system
        return out

    def check_alive(self) -> None:
        dead = {n: p.returncode for n, p in self.procs.items() if p.poll() is not None}
        if dead:
            raise HbgwError(f"{self.label}: {dead} exited early; see the logs in {self.logs}.")


def _wait(ready: Callable[[], bool], d: Deployment, what: str) -> None:
    deadline = time.monotonic() + READY_TIMEOUT
    while not ready():
        d.check_alive()
        if time.monotonic() > deadline:
            raise HbgwError(f"{d.label}: {what} not ready in {READY_TIMEOUT:.0f} s; see {d.logs}.")
        time.sleep(0.1)


@dataclass
class Ours(Deployment):
    rt: Runtime | None = None
    sessions: set[str] = field(default_factory=set)

    def seed(self, sessions: int, interval_s: int) -> float:
        """Sessions with a heartbeat every ``interval_s``, their first due times spread evenly
        over one interval from the returned epoch time (after the seeding is expected to end,
        so the offered rate is steady from the start)."""
        assert self.rt is not None
        rt = self.rt
        per_session = interval_s / sessions
        first_due = time.time() + max(0.2, sessions * SEED_SECONDS_PER_SESSION - interval_s) + 0.3
        for i in range(sessions):
            due = first_due + i * per_session
            self.sessions.add(seed_heartbeat(rt, f"c{i}", interval_s, due, prompt="bench"))
        return first_due

    def retire(self) -> None:
        """Clear the heartbeats of the phase that ended: the deployment idles until the next."""
        assert self.rt is not None
        for sid in self.sessions:
            self.rt.store.heartbeats.clear_heartbeat(sid, utcnow())
            self.rt.index.remove(sid)
        self.sessions = set()

    def fires(self) -> list[Fire]:
        """Fires of this phase's sessions (a retired session's last fire may start later)."""
        assert self.rt is not None
        engine = sa.create_engine(self.rt.settings.effective_database_url)
        query = sa.select(RunRow.session_id, RunRow.due_at, RunRow.started_at)
        try:
            with Session(engine) as db:
                rows = db.execute(query).all()
        finally:
            engine.dispose()
        return rows_to_fires((r[1], r[2]) for r in rows if r[0] in self.sessions)


def seed_heartbeat(rt: Runtime, chat: str, interval_s: int, due: float, *, prompt: str) -> str:
    """A new session whose heartbeat every ``interval_s`` first falls due at epoch ``due``,
    in SQL and in the due index; its id."""
    store = rt.store
    sid = store.sessions.create_session(platform="bench", chat=chat, thread=None, now=utcnow()).id
    state = store.heartbeats.set_heartbeat(
        sid,
        schedule=IntervalSchedule(seconds=interval_s),
        schedule_text=f"every {interval_s}s",
        prompt=prompt,
        now=from_ms(int((due - interval_s) * 1000)),
    )
    # What DueSettle.settle writes, without reading back the rows just written.
    next_due = state.next_due()
    assert next_due is not None
    rt.index.schedule(sid, to_ms(next_due))
    return sid


def migrate(db_url: str) -> None:
    """The schema at head, made by the function `hbgw migrate` runs, in this process: a
    deployment's setup, not one of its measured processes, and not one more Python start
    (about two seconds on a busy two-core machine) before its three."""
    engine = make_engine(db_url)
    try:
        upgrade(engine)
    finally:
        engine.dispose()


def postgres_schema(stack: ExitStack, pg_url: str) -> str:
    """A fresh schema for this run, dropped on the way out; the URL that uses it."""
    schema = f"bench_e2e_{uuid.uuid4().hex[:10]}"
    admin = sa.create_engine(pg_url)
    with admin.begin() as conn:
        conn.execute(sa.text(f'CREATE SCHEMA "{schema}"'))

    def drop() -> None:
        with admin.begin() as conn:
            conn.execute(sa.text(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE'))
        admin.dispose()

    stack.callback(drop)
    joiner = "&" if "?" in pg_url else "?"
    return f"{pg_url}{joiner}options={quote(f'-csearch_path={schema}')}"


@contextmanager
def ours(
    ctx: BenchContext,
    kind: str,
    *,
    redis_db: int | None = None,
    via: Callable[[str], str] | None = None,
    via_roles: tuple[str, ...] = ("beat", "worker"),
    task_events: bool = True,
    beat_hold: float | None = None,
) -> Iterator[Ours]:
    """A running deployment of ours on ``kind`` (sqlite or postgresql), ready for fires.

    ``redis_db``: its own Redis database instead of the kind's; ``via``: the Redis URL its
    processes of ``via_roles`` use, given the real one (a proxy's, bench/redis_latency.py);
    migrate and the bench's own seeding and reading go straight to Redis; ``task_events``:
    HBGW_TASK_EVENTS; ``beat_hold``: HBGW_BEAT_HOLD (None: its default)."""
    home = ctx.work_dir / f"e2e-{kind}-{uuid.uuid4().hex[:6]}"
    logs = home / "logs"
    logs.mkdir(parents=True)
    with ExitStack() as stack:
        if kind == "postgresql":
            if ctx.pg_url is None:
                raise HbgwError("PostgreSQL does not answer.")
            db_url = postgres_schema(stack, ctx.pg_url)
        else:
            db_url = f"sqlite:///{home / 'bench.sqlite3'}"
        redis_url = redis_db_url(ctx.redis_url, OURS_DB[kind] if redis_db is None else redis_db)
        _flush(redis_url)
        settings = Settings(
            home=home,
            database_url=db_url,
            redis_url=redis_url,
            namespace=f"bench-{kind}",
            agent="echo",
            channel="file",
            channel_file=home / "deliveries.jsonl",
            min_interval=1,  # the setting the tests lower; the rule itself is untouched
            log_format="json",
            task_events=task_events,
        )
        if beat_hold is not None:
            settings = settings.model_copy(update={"beat_hold": beat_hold})
        env = settings_env(settings)
        far = env if via is None else settings_env(settings, redis_url=via(redis_url))
        env_of = {role: far if role in via_roles else env for role in ("beat", "worker")}
        migrate(db_url)
        d = Ours(f"ours-{kind}" if via is None else f"ours-{kind}-via-proxy", logs)
        stack.callback(lambda: stop_all(list(d.procs.values())))
        d.procs["beat"] = spawn_hbgw(["beat"], env=env_of["beat"], log=logs / "beat.log")
        for name in WORKERS:
            args = ["worker", "--name", name, "--concurrency", str(CONCURRENCY)]
            d.procs[name] = spawn_hbgw(args, env=env_of["worker"], log=logs / f"{name}.log")
        rt = Runtime(settings, Store.from_url(db_url), connect(redis_url), worker="bench-edge")
        stack.callback(rt.close)
        d.rt = rt
        _wait(lambda: len(rt.registry.live(rt.now_ms())) >= len(WORKERS), d, "the workers")
        yield d


@dataclass
class Redbeat(Deployment):
    url: str = ""
    phase: int = 0

    def seed(self, sessions: int, interval_s: int) -> float:
        self.phase += 1
        first_due = time.time() + 0.5
        app = redbeat_e2e.make_app(self.url)
        redbeat_e2e.populate(app, self._prefix(), sessions, interval_s, first_due)
        return first_due

    def retire(self) -> None:
        redbeat_e2e.remove(redbeat_e2e.make_app(self.url), self._prefix())

    def fires(self) -> list[Fire]:
        client = redis.Redis.from_url(self.url)
        try:
            return redbeat_e2e.read_fires(client, self._prefix())
        finally:
            client.close()

    def _prefix(self) -> str:
        return f"p{self.phase}-"


@contextmanager
def redbeat(ctx: BenchContext) -> Iterator[Redbeat]:
    """celery beat (redbeat) and two celery workers, ready for fires."""
    logs = ctx.work_dir / f"e2e-redbeat-{uuid.uuid4().hex[:6]}" / "logs"
    logs.mkdir(parents=True)
    url = redis_db_url(ctx.redis_url, REDBEAT_DB)
    _flush(url)
    client = redis.Redis.from_url(url)
    env = {**os.environ, redbeat_e2e.URL_ENV: url}
    d = Redbeat("redbeat", logs, url=url)
    app = ["-A", "bench.redbeat_e2e"]
    try:
        scheduler = "bench.redbeat_e2e:TimedRedBeatScheduler"
        # Celery's default longest sleep is 5 minutes: entries added later would wait that
        # long. 1 s is what our beat uses (HBGW_BEAT_MAX_SLEEP), and what a user would set.
        beat = [*app, "beat", "-S", scheduler, "--max-interval", "1", "-l", "WARNING"]
        d.procs["beat"] = spawn_module("celery", beat, env=env, log=logs / "beat.log")
        for name in WORKERS:
            worker = [*app, "worker", "-P", "threads", "-c", str(CONCURRENCY), "-n", f"{name}@%h"]
            worker += ["-Q", redbeat_e2e.QUEUE, "--without-mingle", "--without-gossip"]
            worker += ["-l", "WARNING"]
            d.procs[name] = spawn_module("celery", worker, env=env, log=logs / f"{name}.log")
        _wait(lambda: client.scard(redbeat_e2e.READY) >= 1 + len(WORKERS), d, "beat and workers")
        yield d
    finally:
        stop_all(list(d.procs.values()))
        client.close()
