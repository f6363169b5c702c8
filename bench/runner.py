"""``python -m bench quick|full [--only NAME,...]``: run the benchmarks, write one JSON each."""

from __future__ import annotations

import argparse
import json
import logging
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

from bench.context import FULL, QUICK, BenchContext, pg_url_if_up
from bench.goals import markdown, rows
from bench.meta import machine
from bench.redbeat_setup import flush_sync
from bench.registry import benchmarks
from hbgw.core.embedded import EmbeddedRedis

RESULTS = Path(__file__).resolve().parent / "results"
log = logging.getLogger("hbgw.bench")


def _stamp() -> str:
    return datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")


def write_result(out: Path, name: str, payload: dict[str, object]) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{name}-{_stamp()}.json"
    path.write_text(json.dumps(payload, indent=2, sort_keys=True) + "\n")
    return path


def run_one(ctx: BenchContext, name: str, out: Path) -> Path:
    bench = benchmarks()[name]
    flush_sync(ctx.redis())  # the last benchmark's keys, freed now, not in the background
    started = time.monotonic()
    result = bench(ctx)
    payload = {
        "benchmark": name,
        "profile": ctx.profile,
        "started_at": datetime.now(UTC).isoformat(),
        "seconds": round(time.monotonic() - started, 2),
        "machine": machine(ctx.redis_url),
        "notes": list(ctx.notes),
        "result": result,
    }
    ctx.notes.clear()
    return write_result(out, name, payload)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument("profile", choices=[QUICK, FULL])
    parser.add_argument("--only", default="", help="comma-separated benchmark names")
    parser.add_argument("--out", type=Path, default=RESULTS, help="directory of the JSON files")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(message)s")
    known = list(benchmarks())
    chosen = [n for n in args.only.split(",") if n] or known
    unknown = [n for n in chosen if n not in known]
    if unknown:
        parser.error(f"unknown benchmark(s) {', '.join(unknown)}; known: {', '.join(known)}")
    with (
        tempfile.TemporaryDirectory(prefix="hbgw-bench-") as tmp,
        EmbeddedRedis(Path(tmp) / "redis") as server,
    ):
        url = server.url
        ctx = BenchContext(args.profile, url, Path(tmp), pg_url_if_up())
        for name in chosen:
            began = time.monotonic()
            path = run_one(ctx, name, args.out)
            print(f"{name}: {time.monotonic() - began:.1f}s -> {path}", flush=True)
    if args.profile == FULL:
        # Imported here: matplotlib is only needed for the full profile's plots.
        from bench.plots import write_all

        write_all(args.out)  # a benchmark without a result is skipped with a message
    print(markdown(rows(args.out)), flush=True)
    sys.exit(0)
