"""``python -m chaos quick|long``: one run, a JSON report in bench/results/, exit 1 on a failure."""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

from chaos.profiles import Profile, long, quick
from chaos.run import execute
from core.errors import HbgwError

RESULTS = Path(__file__).resolve().parents[1] / "bench" / "results"


def _profile(args: argparse.Namespace) -> Profile:
    profile = quick() if args.profile == "quick" else long(args.seed)
    if args.traffic is not None:
        # A shorter trial keeps only the faults that fit, each with a quiet tail after it.
        faults = [f for f in profile.faults if f.at + f.duration < args.traffic - 20]
        profile = Profile(
            profile.name, profile.sessions, profile.intervals, args.traffic,
            profile.message_rate, profile.settle, faults,
        )  # fmt: skip
    if args.sessions is not None:
        profile = Profile(
            profile.name, args.sessions, profile.intervals, profile.traffic,
            profile.message_rate, profile.settle, profile.faults,
        )  # fmt: skip
    return profile


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m chaos", description=__doc__)
    parser.add_argument("profile", choices=["quick", "long"])
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--traffic", type=float, help="seconds of traffic (default: profile's)")
    parser.add_argument("--sessions", type=int, help="sessions (default: profile's)")
    parser.add_argument("--out", type=Path, default=RESULTS, help="directory of the report")
    parser.add_argument("--keep", action="store_true", help="keep the run directory and logs")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(message)s", stream=sys.stderr)
    logging.getLogger("chaos").setLevel(logging.INFO)
    try:
        ok = execute(_profile(args), seed=args.seed, out=args.out, keep=args.keep)
    except HbgwError as exc:
        print(f"chaos: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
    raise SystemExit(0 if ok else 1)
