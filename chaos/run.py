"""One chaos run, start to finish: set up, traffic with faults, settle, snapshot, check, clean up.

Everything the run starts is stopped on the way out, whatever happens (``ExitStack``): the role
processes, the Redis server, the PostgreSQL schema and the run directory.
"""

from __future__ import annotations

import logging
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import uuid
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from types import FrameType

import redis

from chaos import collect, recheck
from chaos.checks import run_checks
from chaos.cluster import Cluster, PinnedRedis
from chaos.database import Database, provision
from chaos.evidence import Disruption, Evidence
from chaos.faults import Faults
from chaos.pgcluster import PrivatePostgres, find_bin
from chaos.profiles import BEATS, SETTINGS, WEBHOOK_HANG, WORKERS, Profile
from chaos.proxy import RedisProxy
from chaos.report import Report, summary, write_report
from chaos.skew import skew_env
from chaos.tenant import ALLOWED_HOST, TENANT, Tenant
from chaos.traffic import Traffic
from chaos.webhook_checks import in_sql_ids, webhook_sends
from chaos.webhook_receiver import ChaosReceiver
from hbgw.core.errors import HbgwError
from hbgw.core.settings import Settings
from hbgw.gateway.public_ids import deployment_ids
from hbgw.procs import secrets_env, settings_env, spawn_hbgw
from hbgw.sessions.db import make_engine
from hbgw.sessions.store import Store

log = logging.getLogger("chaos")
READY_TIMEOUT = 120.0  # five Python processes starting on a busy two-core machine
TICK = 0.1


@dataclass
class Deployment:
    home: Path
    settings: Settings
    redis_server: PinnedRedis
    database: Database
    cluster: Cluster
    traffic: Traffic
    proxies: dict[str, RedisProxy]
    pg_server: PrivatePostgres | None
    skew_env: dict[str, str] | None
    receiver: ChaosReceiver
    tenant: Tenant


def _terminate_on_signals() -> None:
    # SIGTERM becomes SystemExit so every cleanup callback runs.
    def handler(signum: int, frame: FrameType | None) -> None:
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, handler)


def _migrate(env: dict[str, str], logs: Path) -> None:
    proc = spawn_hbgw(["migrate"], env=env, log=logs / "migrate.log")
    if proc.wait(120) != 0:
        raise HbgwError(f"`hbgw migrate` failed; see {logs / 'migrate.log'}.")


def _require(profile: Profile, kind: str, available: bool, what: str) -> bool:
    """Whether ``kind`` can run here; with CI set a selected kind must (no silent skip)."""
    if not available and kind in profile.kinds and os.environ.get("CI"):
        raise HbgwError(f"The chaos fault {kind} needs {what} (CI is set), which is missing.")
    return available


def _private_postgres(stack: ExitStack, profile: Profile) -> PrivatePostgres | None:
    """The run's own cluster when PostgreSQL is installed: both database faults apply to it."""
    bindir = find_bin()
    if not _require(profile, "pg_restart", bindir is not None, "PostgreSQL's initdb"):
        return None
    assert bindir is not None
    server = PrivatePostgres(bindir)
    stack.callback(server.stop)
    try:
        server.start()
    except (HbgwError, OSError, subprocess.SubprocessError) as exc:
        if os.environ.get("CI"):
            raise
        # The shared server (or SQLite) carries the run; pg_restart is skipped with a note.
        log.warning("the private PostgreSQL did not start, using the shared one: %s", exc)
        return None
    return server


def _proxies(stack: ExitStack, profile: Profile, upstream: int) -> dict[str, RedisProxy]:
    """A proxy for each role a redis_hang targets; it stops with the run, or by itself."""
    lifetime = READY_TIMEOUT + profile.traffic + profile.settle + 600
    out = {}
    for role in sorted({f.target for f in profile.faults if f.kind == "redis_hang" and f.target}):
        out[role] = RedisProxy(upstream, lifetime)
        stack.callback(out[role].stop)
        out[role].start()
    return out


def _deploy(stack: ExitStack, profile: Profile, seed: int, keep: bool) -> Deployment:
    home = Path(tempfile.mkdtemp(prefix="chaos-"))
    if not keep:
        stack.callback(shutil.rmtree, home, ignore_errors=True)
    logs = home / "logs"
    logs.mkdir()
    redis_server = PinnedRedis(home)
    redis_url = redis_server.start()
    stack.callback(redis_server.stop)
    proxies = _proxies(stack, profile, redis_server.port)
    pg_server = _private_postgres(stack, profile)
    tag = f"chaos-{uuid.uuid4().hex[:10]}"
    database = provision(
        tag, home, require_postgres=bool(os.environ.get("CI")),
        server_url=pg_server.url if pg_server else None,
    )  # fmt: skip
    stack.callback(database.drop)
    settings = Settings(
        home=home,
        database_url=database.url,
        redis_url=redis_url,
        namespace="chaos",
        channel_file=home / "deliveries.jsonl",
        **SETTINGS,
    )
    env = settings_env(settings)
    _migrate(env, logs)
    receiver = _receiver(stack, settings, seed)
    cluster = Cluster(env, logs)
    stack.callback(cluster.stop)
    for name, args in [(b, ["beat"]) for b in BEATS] + [
        (w, ["worker", "--name", w]) for w in WORKERS
    ]:
        via = {"HBGW_REDIS_URL": proxies[name].url_for(redis_url)} if name in proxies else {}
        if name in WORKERS:
            via.update(secrets_env(settings, "worker"))  # the webhook secret signs their POSTs
        cluster.add(name, args, via)
    tenant = _tenant(cluster, receiver, redis_server.port)
    traffic = Traffic(settings, redis_url, profile, seed, webhook_url=receiver.url)
    stack.callback(traffic.close)
    stack.callback(traffic.stop)
    skew = skew_env()
    _require(profile, "clock_skew", skew is not None, "libfaketime")
    return Deployment(
        home, settings, redis_server, database, cluster, traffic, proxies, pg_server, skew,
        receiver, tenant,
    )  # fmt: skip


def _tenant(cluster: Cluster, receiver: ChaosReceiver, redis_port: int) -> Tenant:
    """The API role, with one owner token and no admin token, and the tenant that attacks it."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    url = f"http://127.0.0.1:{port}"
    tenant = Tenant(url, Tenant.new_token(), receiver.url, (redis_port, port))
    cluster.add("api", ["api", "--port", str(port)], tenant.api_env())
    return tenant


def _receiver(stack: ExitStack, settings: Settings, seed: int) -> ChaosReceiver:
    secret = settings.webhook_secret
    assert secret is not None  # SETTINGS sets it
    receiver = ChaosReceiver(secret.get_secret_value(), seed, WEBHOOK_HANG, host=ALLOWED_HOST)
    receiver.start()
    stack.callback(receiver.stop)
    return receiver


def _wait_for_workers(d: Deployment) -> None:
    deadline = time.monotonic() + READY_TIMEOUT
    while len(d.traffic.rt.registry.live(d.traffic.rt.now_ms())) < len(WORKERS):
        if d.cluster.poll() or time.monotonic() > deadline:
            raise HbgwError(f"The workers did not start; see the logs in {d.home / 'logs'}.")
        time.sleep(0.2)


def _note_ready(d: Deployment, faults: Faults) -> None:
    """When a restarted worker is seen live again: part of its fault's recovery."""
    pending = [
        r
        for r in faults.records
        if r.kind == "worker_kill" and r.ended is not None and "ready_s" not in r.detail
    ]
    if not pending:
        return
    try:
        live = d.traffic.rt.registry.live(d.traffic.rt.now_ms())
    except redis.RedisError:
        return
    for record in pending:
        if record.target in live and record.ended is not None:
            record.detail["ready_s"] = round(time.time() - record.ended, 2)


def _drive(d: Deployment, profile: Profile, faults: Faults) -> float:
    """Traffic and faults for the profile's duration; returns when the traffic stopped."""
    d.traffic.start()
    started = time.monotonic()
    while (elapsed := time.monotonic() - started) < profile.traffic:
        faults.step(elapsed)
        d.cluster.poll()
        _note_ready(d, faults)
        time.sleep(TICK)
    faults.finish()
    d.traffic.stop()
    return time.time()


def _settle(d: Deployment, profile: Profile, engine_url: str, grace: float) -> None:
    """Until no user message is queued, and in-flight turns had a grace period (bounded)."""
    engine = make_engine(engine_url)
    started = time.monotonic()
    try:
        while time.monotonic() - started < profile.settle:
            d.cluster.poll()
            quiet = time.monotonic() - started >= grace
            try:
                if quiet and collect.queued_messages(engine) == 0:
                    return
            except Exception as exc:
                log.info("settle: the store did not answer: %s", exc)
            time.sleep(0.5)
    finally:
        engine.dispose()


def _evidence(d: Deployment, profile: Profile, faults: Faults, grace: float) -> Evidence:
    channel = d.settings.channel_file or d.home / "deliveries.jsonl"
    deliveries = collect.read_channel(channel)
    received = d.receiver.records()  # read with the channel file: before SQL
    engine = make_engine(d.database.url)
    try:
        ids = deployment_ids(d.settings, Store(engine).secrets)
        hooked = [in_sql_ids(hit, ids) for hit in received]
        snapshot = time.time()
        runs = collect.read_runs(engine)
        messages, replies = collect.read_messages(engine)
        heartbeats = collect.read_heartbeats(engine)
        jobs = collect.read_jobs(engine)
        records = collect.read_delivery_states(engine, {h.key for h in hooked if h.key})
        tenant_sessions = collect.read_tenant_sessions(engine, TENANT)
    finally:
        engine.dispose()
    s = d.settings
    return Evidence(
        runs=runs,
        messages=messages,
        replies=replies,
        deliveries=deliveries + webhook_sends(hooked),
        heartbeats=heartbeats,
        jobs=jobs,
        faults=[Disruption(r.kind, r.target, r.began, r.ended or r.began) for r in faults.records],
        exits=list(d.cluster.exits),
        accepted=list(d.traffic.accepted),
        expected_faults=list(profile.kinds),
        skipped_faults=list(faults.skipped),
        snapshot=snapshot,
        grace=grace,
        allowance=s.claim_lease + s.restore_interval + s.refund_backoff,
        growth_floor=s.lock_lease,
        load_factor=load_factor(),
        webhook=hooked,
        webhook_records=records,
        attempts=list(d.tenant.attempts),
        tenant_sessions=tenant_sessions,
        tenant_control=d.tenant.control,
        tenant_route=d.tenant.allowed_url,
        leaks=collect.delivered_leaks(channel, _secrets(d)),
    )


def _secrets(d: Deployment) -> dict[str, str]:
    """What the command agent must never read, by name: any HBGW_ variable, the secrets."""
    hook = d.settings.webhook_secret
    return {
        "an HBGW_ variable": "HBGW_",
        "the Redis password": d.redis_server.password,
        "the webhook secret": hook.get_secret_value() if hook else "",
        "the tenant's API token": d.tenant.token,
        "the database URL": d.database.url,
    }


def load_factor() -> float:
    """How many times over the machine's cores are asked for: 1.0 on a quiet machine.

    Lateness is partly the machine's, not the gateway's: on two cores that other jobs keep busy
    every fire waits its turn for a CPU. The allowance grows with the load measured over the
    last minute (the quiet window), so a busy CI machine does not fail the run, while a
    heartbeat that stopped firing (late by the whole quiet window) still does.
    """
    cores = len(os.sched_getaffinity(0)) or 1
    return round(max(1.0, os.getloadavg()[0] / cores), 2)


def execute(profile: Profile, *, seed: int, out: Path, keep: bool) -> bool:
    _terminate_on_signals()
    began = time.time()
    with ExitStack() as stack:
        d = _deploy(stack, profile, seed, keep)
        _wait_for_workers(d)
        d.traffic.setup()
        d.tenant.start()
        admin = redis.Redis.from_url(d.redis_server.url, decode_responses=True)
        stack.callback(admin.close)
        faults = Faults(
            d.cluster, d.redis_server, admin, d.database, profile.faults,
            proxies=d.proxies, pg_server=d.pg_server, skew_env=d.skew_env,
        )  # fmt: skip
        stack.callback(faults.finish)
        traffic_ended = _drive(d, profile, faults)
        d.tenant.join()
        grace = d.settings.lock_lease + d.settings.claim_lease + 3 * d.settings.echo_delay
        _settle(d, profile, d.database.url, grace)
        ev = _evidence(d, profile, faults, grace)
        recheck.save(ev, d.home / "evidence.json")  # python -m chaos.recheck reads it again
        checks = run_checks(ev)
        d.cluster.stop()
        report = Report(profile, seed, d, faults, ev, checks, began, traffic_ended)
        path = write_report(report, out)
        print(summary(report, path))
        if keep:
            print(f"run directory kept: {d.home}")
        return all(c.ok for c in checks)
