"""Liveness: `hbgw agents` judges the stamps of running turns, `hbgw stamp` writes one.

Both use Redis when a deployment answers (HBGW_REDIS_URL, or the embedded server of `hbgw up`)
and the stamp directory otherwise (HBGW_LIVENESS_DIR, default HBGW_HOME/liveness), so a coding
agent's hook works on a laptop with no gateway running.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from hbgw.cli.common import out, out_json, settings
from hbgw.cli.stamp_cmd import redis_now, write_stamp

if TYPE_CHECKING:
    from hbgw.state.liveness import Liveness, Stamp, Thresholds, Verdict
    from hbgw.state.ownership import WorkerRegistry


@contextmanager
def redis_liveness() -> Iterator[tuple[Liveness, WorkerRegistry, int] | None]:
    """Redis' stamps and worker registry, and the time now by Redis' clock (ms)."""
    from hbgw.state.liveness import Liveness
    from hbgw.state.ownership import WorkerRegistry

    with redis_now() as found:
        if found is None:
            yield None
            return
        client, keys, now_ms = found
        ttl_ms = int(settings().worker_ttl * 1000)
        yield Liveness(client, keys), WorkerRegistry(client, keys, ttl_ms=ttl_ms), now_ms


def stamp(
    phase: str = typer.Argument(
        ..., metavar="PHASE", help="thinking, tool:NAME, delivering, idle…"
    ),
    session: str | None = typer.Option(
        None, "--session", help="Session name (default: $HBGW_SESSION, else 'default')."
    ),
    worker: str = typer.Option("hook", "--worker", help="Who stamps, shown by `hbgw agents`."),
    directory: Path | None = typer.Option(
        None, "--dir", metavar="PATH", help="Write to this stamp directory, not to Redis."
    ),
) -> None:
    """Report a session's liveness from another agent's hook (for example after each tool call)."""
    write_stamp(phase, session, worker, directory)


def agents(
    stale: float | None = typer.Option(
        None,
        "--stale",
        metavar="SECONDS",
        help="Age that makes a turn stale? (HBGW_STALE_AFTER, 300).",
    ),
    dead: float | None = typer.Option(
        None,
        "--dead",
        metavar="SECONDS",
        help="Age that makes a turn dead? (HBGW_DEAD_AFTER, 900).",
    ),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
    watch: float | None = typer.Option(
        None, "--watch", metavar="SECONDS", min=0.1, help="Redraw every SECONDS until Ctrl-C."
    ),
    directory: Path | None = typer.Option(
        None, "--dir", metavar="PATH", help="Read this stamp directory (what `hbgw stamp` wrote)."
    ),
    count: int | None = typer.Option(None, "--count", hidden=True, min=1),
) -> None:
    """List running and recent turns, oldest stamp first; exit 1 when one is stale? or dead?."""
    from hbgw.state.liveness import Thresholds

    s = settings()
    limits = Thresholds(
        s.stale_after if stale is None else stale, s.dead_after if dead is None else dead
    )
    rounds = 0
    while True:
        verdicts, source = _verdicts(limits, directory)
        if as_json:
            out_json([v.to_json() for v in verdicts])
        else:
            _table(verdicts, source, clear=watch is not None)
        rounds += 1
        if watch is None or (count is not None and rounds >= count):
            break
        time.sleep(watch)
    if any(v.suspect for v in verdicts):
        raise typer.Exit(1)


def _verdicts(limits: Thresholds, directory: Path | None) -> tuple[list[Verdict], str]:
    from hbgw.core.clock import to_ms, utcnow
    from hbgw.state.liveness import judge
    from hbgw.state.liveness_dir import LivenessDir

    if directory is None:
        with redis_liveness() as found:
            if found is not None:
                stamps: list[Stamp] = found[0].all()
                redis_now_ms = found[2]
                live = found[1].live(redis_now_ms)
                where = f"Redis namespace {settings().namespace}"
                return judge(stamps, redis_now_ms, limits, live), where
    # Stamp files are written and read on this host: its own clock.
    path = directory or settings().effective_liveness_dir
    return judge(LivenessDir(path).all(), to_ms(utcnow()), limits), str(path)


def _table(verdicts: list[Verdict], source: str, *, clear: bool) -> None:
    if clear and sys.stdout.isatty():
        sys.stdout.write("\x1b[H\x1b[2J")  # our own escape code, so not through out()
    elif clear:
        out("")
    if not verdicts:
        out(f"No running or recent turns ({source}).")
        return
    out(f"{'session':<36} {'verdict':<7} {'phase':<24} {'age':>8}  worker")
    for v in verdicts:
        age = f"{v.age_s:.0f}s"
        out(f"{v.stamp.session:<36} {v.verdict:<7} {v.stamp.phase:<24} {age:>8}  {v.stamp.worker}")
