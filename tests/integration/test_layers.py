"""The import-layer contract: complete, and it fails on an import that runs back up a layer."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")


def _pyproject() -> dict[str, Any]:
    with (ROOT / "pyproject.toml").open("rb") as fh:
        return tomllib.load(fh)


def _layers_contract() -> tuple[list[str], list[str]]:
    config = _pyproject()["tool"]["importlinter"]
    contracts = [c for c in config["contracts"] if c["type"] == "layers"]
    assert len(contracts) == 1, "one layers contract orders every package"
    layers = [name.strip() for layer in contracts[0]["layers"] for name in re.split(r"[|:]", layer)]
    return list(config["root_packages"]), layers


def _hbgw_children() -> set[str]:
    """hbgw's modules and packages, its linked layers included (hbgw/beat -> ../beat)."""
    names = {p.stem for p in (ROOT / "hbgw").glob("*.py")} - {"__init__", "__main__"}
    return names | {p.parent.name for p in (ROOT / "hbgw").glob("*/__init__.py")}


def test_every_package_has_a_layer() -> None:
    """A package or module left out of the contract (or a layer removed from it) is
    unconstrained: every top folder is a root or linked into hbgw, every child of hbgw a layer."""
    roots, layers = _layers_contract()
    assert sorted(roots) == ["bench", "chaos", "hbgw"]
    folders = {p.parent.name for p in ROOT.glob("*/__init__.py")}
    linked = {p.name for p in (ROOT / "hbgw").iterdir() if p.is_symlink()}
    assert folders == set(roots) | linked
    assert sorted(layers) == sorted({"bench", "chaos"} | {f"hbgw.{c}" for c in _hbgw_children()})


def test_packaging_and_typecheck_cover_every_package() -> None:
    data = _pyproject()
    checked = data["tool"]["mypy"]["files"]
    found = data["tool"]["setuptools"]["packages"]["find"]["include"]
    assert set(checked) == {"hbgw", "chaos", "bench", "tests"}
    assert found == ["hbgw*"]  # one import name; chaos and bench stay in the repository


def _copy_tree(dest: Path) -> None:
    roots, _ = _layers_contract()
    linked = [p.name for p in (ROOT / "hbgw").iterdir() if p.is_symlink()]
    for package in roots + linked:
        shutil.copytree(
            ROOT / package,
            dest / package,
            symlinks=True,
            ignore=shutil.ignore_patterns("__pycache__"),
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
        ("beat/core.py", "import hbgw.workers.runner"),  # siblings stay independent
        ("hbgw/state/runtime.py", "import hbgw.wiring"),  # the Redis boundary never reaches the top
        ("sessions/heartbeat.py", "import hbgw.state.keys"),  # the SQL truth knows no Redis
        (
            "hbgw/core/clock.py",
            "import hbgw.sessions.states",
        ),  # the ground floor imports nothing above
        ("hbgw/procs.py", "import bench.stats"),  # the runtime never needs the repository's tools
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
