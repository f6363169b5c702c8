"""The import-layer contract: complete, and it fails on an import that runs back up a layer."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")


def _pyproject() -> dict[str, Any]:
    with (ROOT / "pyproject.toml").open("rb") as fh:
        return tomllib.load(fh)


def _layers_contract() -> tuple[list[str], list[str]]:
    config = _pyproject()["tool"]["importlinter"]
    contracts = [c for c in config["contracts"] if c["type"] == "layers"]
    assert len(contracts) == 1, "one layers contract orders every package"
    layers = [name.strip() for layer in contracts[0]["layers"] for name in layer.split("|")]
    return list(config["root_packages"]), layers


def test_every_package_has_a_layer() -> None:
    """A package left out of the contract (or a layer removed from it) is unconstrained."""
    roots, layers = _layers_contract()
    shipped = sorted(p.parent.name for p in ROOT.glob("*/__init__.py"))
    assert sorted(roots) == shipped
    assert sorted(layers) == shipped


def test_packaging_and_typecheck_cover_every_package() -> None:
    data = _pyproject()
    roots, _ = _layers_contract()
    checked = data["tool"]["mypy"]["files"]
    found = data["tool"]["setuptools"]["packages"]["find"]["include"]
    assert set(roots) | {"tests"} <= set(checked)
    assert {f"{p}*" for p in roots} <= set(found)


def _copy_tree(dest: Path) -> None:
    roots, _ = _layers_contract()
    for package in roots:
        shutil.copytree(
            ROOT / package, dest / package, ignore=shutil.ignore_patterns("__pycache__")
        )
    shutil.copy(ROOT / "pyproject.toml", dest / "pyproject.toml")


def _lint_imports(cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(cwd)}
    return subprocess.run(
        [str(LINT_IMPORTS), "--no-cache"],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.mark.parametrize(
    ("module", "back_up_import"),
    [
        ("beat/core.py", "import workers.runner"),  # siblings stay independent
        ("state/runtime.py", "import hbgw.wiring"),  # the Redis boundary never reaches the top
        ("sessions/heartbeat.py", "import state.keys"),  # the SQL truth knows no Redis
        ("core/clock.py", "import sessions.states"),  # the ground floor imports nothing above
    ],
)
def test_a_back_up_import_breaks_the_contract(
    tmp_path: Path, module: str, back_up_import: str
) -> None:
    _copy_tree(tmp_path)
    assert _lint_imports(tmp_path).returncode == 0
    with (tmp_path / module).open("a") as fh:
        fh.write(f"\n{back_up_import}  # noqa: E402\n")
    result = _lint_imports(tmp_path)
    assert result.returncode != 0
    assert "BROKEN" in result.stdout.upper()
