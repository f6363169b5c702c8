"""How fast `hbgw` commands start: wall and CPU time of a whole process, and the modules it
imports (``-X importtime``: a count that does not depend on how busy the machine is).

`hbgw stamp` runs in a coding agent's hook on every tool call, so it has the CLI's one short
path (no Typer, pydantic or redis-py) and should start in under 0.2 s. Each command runs in a
user's environment (its own HBGW_HOME, no PYTHON* variables but the checkout on the path):
`--help` as the floor of a Typer command, `stamp` into a directory and into Redis (the
context's), and `heartbeat status --json` of a session with a heartbeat on SQLite (with Redis
when there is one) as the price of a command on the main path (Typer, ``Settings``, the store,
redis-py), which scripts poll far less often than hooks stamp. The 1-minute load average is kept
beside each command: on a busy machine the wall time grows, the CPU time and the module count
much less. ``python -m bench quick --only cli_start``.
"""

from __future__ import annotations

import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

from bench.context import BenchContext, Result

NAME = "cli_start"
ROOT = Path(__file__).resolve().parent.parent
GOAL_S = 0.2
# What the stamp's module graph must not reach for it to start fast.
HEAVY = ("sqlalchemy", "celery", "fastapi", "alembic", "typer", "pydantic", "redis")


def user_env(home: Path, redis_url: str | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HBGW_", "PYTHON"))}
    env.update(HBGW_HOME=str(home), PYTHONPATH=str(ROOT))
    if redis_url:
        env.update(HBGW_REDIS_URL=redis_url, HBGW_NAMESPACE="bench-cli-start")
    return env


def hbgw(args: list[str], env: dict[str, str], *extra: str) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, *extra, "-m", "hbgw", *args]
    return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60, check=False)


def timed(args: list[str], env: dict[str, str], repeats: int) -> Result:
    """Median and best wall time, median CPU time (user + system) of ``repeats`` runs."""
    walls, cpus = [], []
    load = os.getloadavg()[0]
    for _ in range(repeats):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        done = hbgw(args, env)
        walls.append(time.perf_counter() - start)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpus.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
        if done.returncode != 0:
            raise RuntimeError(f"hbgw {' '.join(args)} exited {done.returncode}: {done.stderr}")
    imports = hbgw(args, env, "-X", "importtime").stderr
    modules = [line.rsplit("|", 1)[-1].strip() for line in imports.splitlines() if "|" in line]
    return {
        "wall_s": {"median": statistics.median(walls), "min": min(walls)},
        "cpu_s": {"median": statistics.median(cpus)},
        "modules": len(modules) - 1,  # less the header line
        "heavy": sorted({m.split(".")[0] for m in modules} & set(HEAVY)),
        "loadavg_1m": round(load, 2),
    }


def commands(home: Path, redis_url: str | None) -> dict[str, tuple[list[str], dict[str, str]]]:
    """The commands measured, each with its environment; a session with a heartbeat first."""
    plain, with_redis = user_env(home, None), user_env(home, redis_url)
    sid = with_heartbeat(plain)
    found: dict[str, tuple[list[str], dict[str, str]]] = {
        "help": (["--help"], plain),
        "stamp_dir": (["stamp", "--dir", str(home / "stamps"), "thinking"], plain),
        "heartbeat_status_json": (["heartbeat", "status", sid, "--json"], with_redis),
    }
    if redis_url:
        found["stamp_redis"] = (["stamp", "--session", "bench", "thinking"], with_redis)
    return found


def with_heartbeat(env: dict[str, str]) -> str:
    made = hbgw(["session", "create", "--platform", "cli", "--chat", "bench"], env)
    sid = made.stdout.strip()
    hbgw(["heartbeat", "set", sid, "--every", "10m", "check", "CI"], env)
    return sid


def measure(work_dir: Path, redis_url: str | None, repeats: int) -> Result:
    home = work_dir / "cli-start-home"
    home.mkdir(parents=True, exist_ok=True)
    found = commands(home, redis_url)
    timings = {name: timed(args, env, repeats) for name, (args, env) in found.items()}
    return {"repeats": repeats, "goal_s": GOAL_S, "commands": timings}


def run(ctx: BenchContext) -> Result:
    return measure(ctx.work_dir, ctx.redis_url, 7 if ctx.quick else 21)


if __name__ == "__main__":
    import json
    import tempfile

    with tempfile.TemporaryDirectory() as scratch:
        redis_url = os.environ.get("HBGW_REDIS_URL")
        print(json.dumps(measure(Path(scratch), redis_url, 7), indent=2))
