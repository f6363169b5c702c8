"""Issue 20, item 8 and issue 28, item 6: `hbgw stamp` — a coding agent's hook runs it on every
tool call — imports only what it uses, and its short path (``hbgw.cli.fast``) says what the full
command says. Structural checks of the module graph (which packages load), never a timing:
bench/cli_start.py measures the time."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import redis
from support.cli_fixtures import Hbgw

from hbgw.cli.fast import stamp_args
from hbgw.state.keys import Keys

ROOT = Path(__file__).resolve().parents[2]
# What a stamp must not import with a plain Redis (issue 20, item 8).
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


def test_with_redis_both_paths_say_the_same(
    tmp_path: Path,
    hbgw: Hbgw,
    monkeypatch: pytest.MonkeyPatch,
    redis_url: str,
    redis_ns: str,
    redis_client: redis.Redis,
) -> None:
    env = {"HBGW_REDIS_URL": redis_url, "HBGW_NAMESPACE": redis_ns}
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    for argv in (
        ["stamp", "--session", "s1", "idle"],
        ["stamp", "--worker", "w2", "tool:grep"],
        ["stamp", "--session", "no/slash", "idle"],
        ["stamp", "--session", "s1", "not a phase\n"],
    ):
        short, packages = loaded(argv, tmp_path, **env)
        full = hbgw(*argv)
        assert (short.returncode, short.stdout) == (full.code, full.out), argv
        said = [line for line in short.stderr.splitlines() if not line.startswith("import time")]
        assert said == full.err.splitlines(), argv
        assert packages & HEAVY == set(), argv
    stored = redis_client.hgetall(Keys(redis_ns).liveness())
    assert {k if isinstance(k, str) else k.decode() for k in stored} == {"s1", "default"}


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
    shown = json.loads(said["heartbeat"].out)  # one path: `hbgw heartbeat status` is Typer's
    assert (shown["emergency_stop"], shown["waiting_for_idle"]) == (None, False)


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
        ["heartbeat", "status", "s", "--json"],  # one path: only the stamp is short
        ["heartbeat"],
        [],
    ],
)
def test_what_the_short_path_does_not_read_goes_to_the_full_command(argv: list[str]) -> None:
    assert stamp_args(argv) is None


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
    from hbgw.sessions.db import ensure_schema, head_revision, make_engine
    from hbgw.sessions.schema_head import file_head

    engine = make_engine(f"sqlite:///{tmp_path / 'db.sqlite3'}")
    try:
        assert file_head() is not None and file_head() == head_revision(engine)
        ensure_schema(engine)  # a new file: no alembic_version yet, so Alembic migrates it
        with engine.connect() as conn:
            stamped = conn.exec_driver_sql("SELECT version_num FROM alembic_version").all()
        assert [tuple(r) for r in stamped] == [(file_head(),)]
    finally:
        engine.dispose()
