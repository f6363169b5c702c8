"""Issue 20, item 13: every module of the project reaches the layers by the one installed name
(``hbgw.workers``, not ``workers``); the three layer folders that stay at the top of the
repository are linked into hbgw/, the other three live there. A stray old name would work in the
repository and fail in the wheel."""

from __future__ import annotations

import ast
import subprocess
from pathlib import Path

from support.one_name import LAYERS, LINKED

ROOT = Path(__file__).resolve().parents[2]


def _tracked_python() -> list[Path]:
    names = subprocess.run(
        ["git", "ls-files", "*.py"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    return [ROOT / n for n in names if not (ROOT / n).is_symlink()]


def _old_imports(path: Path) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        elif isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        else:
            continue
        found += [
            f"{path.relative_to(ROOT)}:{node.lineno} {n}"
            for n in names
            if n.split(".")[0] in LAYERS
        ]
    return found


def test_no_module_imports_a_layer_by_its_folder_name() -> None:
    files = _tracked_python()
    assert len(files) > 300  # git ls-files saw the tree
    assert [hit for path in files for hit in _old_imports(path)] == []


def test_each_layer_folder_is_linked_into_hbgw_or_lives_there() -> None:
    for layer in LAYERS:
        inside = ROOT / "hbgw" / layer
        if layer in LINKED:
            assert inside.is_symlink() and inside.resolve() == ROOT / layer, layer
        else:
            assert inside.is_dir() and not inside.is_symlink(), layer
            assert not (ROOT / layer).exists(), f"{layer}/ moved into hbgw/"
