"""``python -m chaos quick|long``: one run, a JSON report in bench/results/, exit 1 on a failure."""

from __future__ import annotations

import argparse
import logging
import sys
from dataclasses import replace
from pathlib import Path

from chaos.profiles import FAULT_GROUPS, FAULT_KINDS, Profile, long, quick
from chaos.run import execute
from hbgw.core.errors import HbgwError

RESULTS = Path(__file__).resolve().parents[1] / "bench" / "results"


def fault_kinds(spec: str) -> tuple[str, ...]:
    """``--faults``: kinds and group names, comma-separated (``classic,redis_hang``)."""
    kinds: list[str] = []
    for name in (part.strip() for part in spec.split(",") if part.strip()):
        if name not in FAULT_GROUPS and name not in FAULT_KINDS:
            known = ", ".join([*FAULT_GROUPS, *FAULT_KINDS])
            raise HbgwError(f"Unknown fault kind {name!r} in --faults; choose from {known}.")
        kinds += [k for k in FAULT_GROUPS.get(name, (name,)) if k not in kinds]
    if not kinds:
        raise HbgwError("--faults names no fault kind; give one or more, e.g. --faults classic.")
    return tuple(kinds)


def _profile(args: argparse.Namespace) -> Profile:
    profile = quick() if args.profile == "quick" else long(args.seed)
    if args.faults is not None:
        kinds = fault_kinds(args.faults)
        profile = replace(
            profile, faults=[f for f in profile.faults if f.kind in kinds], kinds=kinds
        )
    if args.traffic is not None:
        # A shorter trial keeps only the faults that fit, each with a quiet tail after it.
        faults = [f for f in profile.faults if f.at + f.duration < args.traffic - 20]
        profile = replace(profile, traffic=args.traffic, faults=faults)
    if args.sessions is not None:
        profile = replace(profile, sessions=args.sessions)
    return profile


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m chaos", description=__doc__)
    parser.add_argument("profile", choices=["quick", "long"])
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--traffic", type=float, help="seconds of traffic (default: profile's)")
    parser.add_argument("--sessions", type=int, help="sessions (default: profile's)")
    parser.add_argument("--out", type=Path, default=RESULTS, help="directory of the report")
    parser.add_argument("--keep", action="store_true", help="keep the run directory and logs")
    parser.add_argument(
        "--faults",
        help="comma-separated fault kinds or groups to inject (default: all); groups: "
        + ", ".join(f"{g} ({' '.join(k)})" for g, k in FAULT_GROUPS.items() if g != "all"),
    )
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(message)s", stream=sys.stderr)
    logging.getLogger("chaos").setLevel(logging.INFO)
    try:
        ok = execute(_profile(args), seed=args.seed, out=args.out, keep=args.keep)
    except HbgwError as exc:
        print(f"chaos: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
    raise SystemExit(0 if ok else 1)
