"""Profile one saturated end-to-end run of ours: py-spy on a worker and on beat at once.

``python -m bench.e2e_profile [--kind sqlite|postgresql] [--rate 100] [--seconds 15]`` starts
the same deployment as the e2e benchmark, offers ``rate`` fires a second, and after a short
warm-up records both processes with py-spy (``pip install py-spy``; not a bench dependency)
into bench/results/profile-{worker,beat}-<stamp>.txt (collapsed stacks, one line per stack
with its sample count: the input of flamegraph tools) and prints the hottest frames.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import tempfile
import time
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path

from bench import e2e_systems
from bench.context import BenchContext, pg_url_if_up
from bench.profile_groups import report, stacks
from bench.runner import RESULTS
from hbgw.core.embedded import EmbeddedRedis

WARMUP_S = 5.0


def _record(pid: int, out: Path, seconds: int, gil: bool) -> subprocess.Popen[bytes]:
    exe = shutil.which("py-spy")
    if exe is None:
        raise SystemExit("py-spy is not installed: .venv/bin/pip install py-spy")
    args = [exe, "record", "--pid", str(pid), "--duration", str(seconds), "--nonblocking"]
    args += ["--format", "raw", "-o", str(out)] + (["--gil"] if gil else [])
    return subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def hot_frames(collapsed: Path, top: int = 12) -> list[tuple[str, float]]:
    """Frames by inclusive share of the samples (a frame counted once per stack)."""
    counts: Counter[str] = Counter()
    total = 0
    for stack, samples in stacks(collapsed):
        total += samples
        for frame in set(stack.split(";")):
            counts[frame] += samples
    return (
        [(frame, round(100 * c / total, 1)) for frame, c in counts.most_common(top)]
        if total
        else []
    )


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.e2e_profile", description=__doc__)
    parser.add_argument("--kind", choices=["sqlite", "postgresql"], default="sqlite")
    parser.add_argument("--rate", type=int, default=100)
    parser.add_argument("--seconds", type=int, default=15)
    parser.add_argument(
        "--gil", action="store_true", help="only threads holding the GIL: CPU spent in Python"
    )
    args = parser.parse_args()
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    with (
        tempfile.TemporaryDirectory(prefix="hbgw-profile-") as tmp,
        EmbeddedRedis(Path(tmp) / "redis") as server,
    ):
        ctx = BenchContext("full", server.url, Path(tmp), pg_url_if_up())
        with e2e_systems.ours(ctx, args.kind) as d:
            d.seed(args.rate, 1)
            time.sleep(WARMUP_S)
            outs = {
                role: RESULTS
                / f"profile-{role}-{args.kind}{'-gil' if args.gil else ''}-{stamp}.txt"
                for role in ("worker", "beat")
            }
            spies = [
                _record(d.procs["w1"].pid, outs["worker"], args.seconds, args.gil),
                _record(d.procs["beat"].pid, outs["beat"], args.seconds, args.gil),
            ]
            for spy in spies:
                spy.wait(args.seconds + 60)
    for role, path in outs.items():
        print(f"{role}: {path}")
        for frame, share in hot_frames(path) if path.exists() else []:
            print(f"  {share:5.1f}%  {frame}")
        if path.exists():
            print(report(path))


if __name__ == "__main__":
    main()
