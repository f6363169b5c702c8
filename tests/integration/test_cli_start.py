"""Issue 20, item 8: `hbgw stamp` — a coding agent's hook runs it on every tool call — and the
status command import only what they use. Structural checks of the module graph (which
packages load), never a timing: bench/cli_start.py measures the time."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import redis
from support.cli_fixtures import Hbgw

from hbgw.cli.fast import short_args, stamp_args
from hbgw.state.keys import Keys

ROOT = Path(__file__).resolve().parents[2]
# What the short commands must not import on SQLite with a plain Redis (issue 20, item 8).
HEAVY = frozenset({"sqlalchemy", "celery", "fastapi", "alembic", "typer", "pydantic", "redis"})


def loaded(
    args: list[str], home: Path, **env: str
) -> tuple[subprocess.CompletedProcess[str], set[str]]:
    """Run `python -m hbgw ARGS` as a user would (the console script's entry point) and the
    top-level packages it imported."""
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "hbgw", *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        cwd=home,
        env={"HBGW_HOME": str(home), "PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), **env},
    )
    lines = [line.rsplit("|", 1)[-1].strip() for line in done.stderr.splitlines() if "|" in line]
    return done, {name.split(".")[0] for name in lines[1:]}


def test_a_stamp_into_a_directory_loads_neither_typer_nor_pydantic_nor_redis(
    tmp_path: Path,
) -> None:
    done, packages = loaded(["stamp", "--dir", str(tmp_path / "d"), "tool:pytest"], tmp_path)
    assert done.returncode == 0 and "Stamped default: tool:pytest" in done.stdout, done.stderr
    heavy = {
        "sqlalchemy",
        "celery",
        "fastapi",
        "alembic",
        "typer",
        "pydantic",
        "redis",
    }
    assert packages & heavy == set()


def test_a_stamp_into_redis_loads_no_sql_celery_web_or_typer(
    tmp_path: Path, redis_url: str, redis_ns: str
) -> None:
    done, packages = loaded(
        ["stamp", "--session", "s1", "thinking"],
        tmp_path,
        HBGW_REDIS_URL=redis_url,
        HBGW_NAMESPACE=redis_ns,
    )
    assert done.returncode == 0 and f"(Redis namespace {redis_ns})" in done.stdout, done.stderr
    # pydantic neither: the quick settings reader knows this environment (core.settings_quick);
    # nor redis-py: the quick client speaks to a plain Redis (state.resp_quick).
    assert packages & (HEAVY | {"prometheus_client"}) == set()


def test_a_stamp_with_a_setting_the_quick_reader_does_not_know_reads_the_full_settings(
    tmp_path: Path,
) -> None:
    done, packages = loaded(
        ["stamp", "--dir", str(tmp_path / "d"), "x"], tmp_path, HBGW_MIN_INTERVAL="nope"
    )
    assert done.returncode == 0, done.stderr  # --dir reads no settings at all
    bad, packages = loaded(["stamp", "x"], tmp_path, HBGW_MIN_INTERVAL="nope")
    assert bad.returncode == 2 and "HBGW_MIN_INTERVAL is not valid" in bad.stderr
    assert "pydantic" in packages


def test_heartbeat_status_json_loads_no_celery_web_alembic_or_metrics(
    tmp_path: Path, hbgw: Hbgw
) -> None:
    sid = hbgw("session", "create", "--platform", "cli", "--chat", "me").out.strip()
    hbgw("heartbeat", "set", sid, "--every", "10m", "check", "CI")
    done, packages = loaded(["heartbeat", "status", sid, "--json"], tmp_path)
    assert done.returncode == 0 and json.loads(done.stdout)["status"] == "active", done.stderr
    # SQL is its work, read with sqlite3 (sessions.status_read); SQLAlchemy, Typer, pydantic,
    # the migration tool, Celery, the web stack and metrics are not, nor redis-py.
    heavy = HEAVY | {"mako", "prometheus_client"}
    assert packages & heavy == set() and "sqlite3" in packages
    text, packages = loaded(["heartbeat", "status", sid], tmp_path)
    assert text.returncode == 0 and text.stdout.startswith("♥ Heartbeat"), text.stderr
    assert packages & heavy == set()


def test_heartbeat_status_asks_redis_without_typer_or_pydantic(
    tmp_path: Path, hbgw: Hbgw, redis_url: str, redis_ns: str
) -> None:
    sid = hbgw("session", "create", "--platform", "cli", "--chat", "me").out.strip()
    hbgw("heartbeat", "set", sid, "--every", "10m", "check", "CI")
    redis_env = {"HBGW_REDIS_URL": redis_url, "HBGW_NAMESPACE": redis_ns}
    done, packages = loaded(["heartbeat", "status", sid, "--json"], tmp_path, **redis_env)
    assert done.returncode == 0, done.stderr
    shown = json.loads(done.stdout)
    assert (shown["emergency_stop"], shown["waiting_for_idle"]) == (False, False)
    assert packages & (HEAVY | {"prometheus_client"}) == set()


def test_heartbeat_status_on_postgresql_reads_with_psycopg_alone(
    tmp_path: Path,
    hbgw: Hbgw,
    monkeypatch: pytest.MonkeyPatch,
    pg_schema_url: str,
    redis_url: str,
    redis_ns: str,
    redis_client: redis.Redis,
) -> None:
    from hbgw.core.clock import utcnow
    from hbgw.sessions.db import make_engine, upgrade
    from hbgw.sessions.grammar import IntervalSchedule
    from hbgw.sessions.store import Store

    engine = make_engine(pg_schema_url)
    upgrade(engine)  # PostgreSQL is migrated by `hbgw migrate`, never by a command
    store = Store(engine)
    try:  # a paused heartbeat: nothing in its view moves with the clock
        sid = store.sessions.create_session(platform="cli", chat="me", now=utcnow()).id
        every = IntervalSchedule(600)
        store.heartbeats.set_heartbeat(
            sid, schedule=every, schedule_text="10m", prompt="CI", now=utcnow()
        )
        store.heartbeats.pause_heartbeat(sid, utcnow())
    finally:
        store.close()
    redis_client.set(Keys(redis_ns).estop(sid), "1")
    env = {"HBGW_DATABASE_URL": pg_schema_url, "HBGW_REDIS_URL": redis_url}
    for name, value in {**env, "HBGW_NAMESPACE": redis_ns}.items():
        monkeypatch.setenv(name, value)
    argv = ["heartbeat", "status", sid, "--json"]
    done, packages = loaded(argv, tmp_path, **env, HBGW_NAMESPACE=redis_ns)
    assert done.returncode == 0, done.stderr
    assert "psycopg" in packages and packages & HEAVY == set()
    full = hbgw(*argv)
    assert (done.stdout, done.returncode) == (full.out, full.code)
    shown = json.loads(done.stdout)
    assert (shown["status"], shown["emergency_stop"]) == ("paused", True)


def test_heartbeat_status_says_the_same_on_both_paths(tmp_path: Path, hbgw: Hbgw) -> None:
    sid = hbgw("session", "create", "--platform", "cli", "--chat", "me").out.strip()
    bare = hbgw("session", "create", "--platform", "cli", "--chat", "you").out.strip()
    hbgw("heartbeat", "set", sid, "--every", "10m", "--times", "3", "check", "CI")
    hbgw("heartbeat", "pause", sid)  # its text names no time: the same at any moment
    for argv in (
        ["heartbeat", "status", sid, "--json"],
        ["heartbeat", "status", "--json", sid],
        ["heartbeat", "status", sid],
        ["heartbeat", "status", bare],
        ["heartbeat", "status", "no-such-session"],
    ):
        short, _ = loaded(argv, tmp_path)
        full = hbgw(*argv)
        assert (short.returncode, short.stdout) == (full.code, full.out), argv
        said = [line for line in short.stderr.splitlines() if not line.startswith("import time")]
        assert said == full.err.splitlines(), argv


def test_with_redis_both_paths_say_the_same(
    tmp_path: Path,
    hbgw: Hbgw,
    monkeypatch: pytest.MonkeyPatch,
    redis_url: str,
    redis_ns: str,
    redis_client: redis.Redis,
) -> None:
    sid = hbgw("session", "create", "--platform", "cli", "--chat", "me").out.strip()
    hbgw("heartbeat", "set", sid, "--every", "10m", "--times", "3", "check", "CI")
    hbgw("heartbeat", "pause", sid)
    env = {"HBGW_REDIS_URL": redis_url, "HBGW_NAMESPACE": redis_ns}
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    redis_client.set(Keys(redis_ns).estop(), "1")  # the global stop
    redis_client.rpush(Keys(redis_ns).inbox(sid), "1")  # a message waits: busy
    for argv in (
        ["heartbeat", "status", sid, "--json"],
        ["heartbeat", "status", sid],
        ["heartbeat", "status", "no-such-session"],
        ["stamp", "--session", "s1", "idle"],
    ):
        short, packages = loaded(argv, tmp_path, **env)
        full = hbgw(*argv)
        assert (short.returncode, short.stdout) == (full.code, full.out), argv
        said = [line for line in short.stderr.splitlines() if not line.startswith("import time")]
        assert said == full.err.splitlines(), argv
        assert packages & HEAVY == set(), argv
    shown, _ = loaded(["heartbeat", "status", sid, "--json"], tmp_path, **env)
    assert json.loads(shown.stdout)["emergency_stop"] is True


def test_a_redis_that_does_not_answer_is_the_same_note_on_both_paths(
    tmp_path: Path, hbgw: Hbgw, monkeypatch: pytest.MonkeyPatch
) -> None:
    from support.tls_redis import free_port

    env = {"HBGW_REDIS_URL": f"redis://:pw-not-shown@127.0.0.1:{free_port()}/0"}
    monkeypatch.setenv("HBGW_REDIS_URL", env["HBGW_REDIS_URL"])
    sid = hbgw("session", "create", "--platform", "cli", "--chat", "me").out.strip()
    said = {}
    for argv in (["stamp", "--session", "s1", "idle"], ["heartbeat", "status", sid, "--json"]):
        short, _ = loaded(argv, tmp_path, **env)
        full = hbgw(*argv)
        assert (short.returncode, short.stdout) == (full.code, full.out), argv
        lines = [line for line in short.stderr.splitlines() if not line.startswith("import time")]
        assert lines == full.err.splitlines(), argv
        said[argv[0]] = full
    assert "did not answer" in said["stamp"].err and "pw-not-shown" not in said["stamp"].err
    assert json.loads(said["heartbeat"].out)["emergency_stop"] is None


@pytest.mark.parametrize(
    "argv",
    [
        ["stamp", "--help"],
        ["stamp"],  # no phase: Typer's usage error
        ["stamp", "x", "--bogus"],
        ["stamp", "x", "y"],
        ["stamp", "--sess", "a", "x"],  # no abbreviations: Typer would refuse it
        ["agents"],
        ["stamp", "--", "x"],
        ["heartbeat", "status"],  # no session: Typer's usage error
        ["heartbeat", "status", "s", "--help"],
        ["heartbeat", "status", "s", "--bogus"],
        ["heartbeat", "status", "s", "t"],
        ["heartbeat", "status", "s", "--js"],
        ["heartbeat", "status", "s", "--json=yes"],
        ["heartbeat", "set", "s", "check"],
        ["heartbeat"],
    ],
)
def test_what_the_short_path_does_not_read_goes_to_the_full_command(argv: list[str]) -> None:
    assert short_args(argv) is None and stamp_args(argv) is None


def test_the_short_path_reads_the_options_as_the_full_command_does(
    tmp_path: Path, hbgw: Hbgw
) -> None:
    args = stamp_args(["stamp", "--worker=w", "--session", "s", "--dir", str(tmp_path), "idle"])
    assert args is not None
    assert (args.phase, args.session, args.worker, args.dir) == ("idle", "s", "w", tmp_path)
    short, _ = loaded(["stamp", "--session", "s", "--dir", str(tmp_path / "a"), "idle"], tmp_path)
    full = hbgw("stamp", "--session", "s", "--dir", str(tmp_path / "b"), "idle")
    assert short.stdout.replace("/a/", "/b/") == full.out
    bad, _ = loaded(["stamp", "--session", "no/slash", "x"], tmp_path)
    refused = hbgw("stamp", "--session", "no/slash", "x")
    assert (bad.returncode, bad.stdout) == (refused.code, refused.out) == (2, "")
    assert bad.stderr.splitlines()[-1] == refused.err.strip()


def test_the_files_head_is_alembics_head(tmp_path: Path) -> None:
    from hbgw.sessions.db import ensure_schema, file_head, head_revision, make_engine

    engine = make_engine(f"sqlite:///{tmp_path / 'db.sqlite3'}")
    try:
        assert file_head() is not None and file_head() == head_revision(engine)
        ensure_schema(engine)  # a new file: no alembic_version yet, so Alembic migrates it
        with engine.connect() as conn:
            stamped = conn.exec_driver_sql("SELECT version_num FROM alembic_version").all()
        assert [tuple(r) for r in stamped] == [(file_head(),)]
    finally:
        engine.dispose()
