"""Holds the fire path's modules at their branch-coverage floor.

Reads the report `coverage json` wrote and pyproject.toml's ``[tool.hbgw.fire-path]`` (the
modules and the floor), prints each module's share of branches taken, and exits 1 naming the
modules below the floor, or a module the report does not have (a renamed file must be renamed
in the list too, never dropped from it silently).

    python tools/coverage_floor.py coverage.json
"""

from __future__ import annotations

import json
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def branch_share(summary: dict[str, float]) -> float:
    total = summary["num_branches"]
    return 100.0 if total == 0 else 100.0 * summary["covered_branches"] / total


def main(report_path: str) -> int:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["hbgw"]["fire-path"]
    floor, modules = float(config["branch_floor"]), list(config["modules"])
    files = json.loads(Path(report_path).read_text())["files"]
    below: list[str] = []
    print(f"The fire path's branch coverage (floor {floor:.0f} %):")
    for module in modules:
        found = files.get(module)
        if found is None:
            print(f"  {module:40} not in the report")
            below.append(module)
            continue
        share = branch_share(found["summary"])
        taken, total = found["summary"]["covered_branches"], found["summary"]["num_branches"]
        mark = "" if share >= floor else "  BELOW"
        print(f"  {module:40} {share:5.1f} %  ({taken}/{total} branches){mark}")
        if share < floor:
            below.append(module)
    if below:
        print(f"Below the floor or missing: {', '.join(below)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "coverage.json"))
