"""Issue 20, item 8: `hbgw stamp` — a coding agent's hook runs it on every tool call — and the
status command import only what they use. Structural checks of the module graph (which
packages load), never a timing: bench/cli_start.py measures the time."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from support.cli_fixtures import Hbgw

from hbgw.cli.fast import stamp_args

ROOT = Path(__file__).resolve().parent.parent


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
    assert "redis" in packages
    assert (
        packages & {"sqlalchemy", "celery", "fastapi", "alembic", "typer", "prometheus_client"}
        == set()
    )


def test_heartbeat_status_json_loads_no_celery_web_alembic_or_metrics(
    tmp_path: Path, hbgw: Hbgw
) -> None:
    sid = hbgw("session", "create", "--platform", "cli", "--chat", "me").out.strip()
    hbgw("heartbeat", "set", sid, "--every", "10m", "check", "CI")
    done, packages = loaded(["heartbeat", "status", sid, "--json"], tmp_path)
    assert done.returncode == 0 and json.loads(done.stdout)["status"] == "active", done.stderr
    # SQL is its work; the migration tool, Celery, the web stack and metrics are not.
    assert packages & {"celery", "fastapi", "alembic", "mako", "prometheus_client"} == set()


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
