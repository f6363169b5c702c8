"""Modest sizes keep the house readable: modules under 400 lines, functions under 50.

Alembic migrations are exempt: a schema is written out once, in full.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("core", "sessions", "state", "beat", "workers", "gateway", "hbgw", "chaos", "tests")
MAX_MODULE_LINES = 400
MAX_FUNCTION_LINES = 50


def _sources() -> list[Path]:
    return sorted(
        path
        for package in PACKAGES
        for path in (ROOT / package).rglob("*.py")
        if "migrations" not in path.parts
    )


def test_modules_are_modest() -> None:
    too_long = {
        str(path.relative_to(ROOT)): lines
        for path in _sources()
        if (lines := len(path.read_text().splitlines())) > MAX_MODULE_LINES
    }
    assert too_long == {}, "split these by concern"


def test_functions_are_modest() -> None:
    too_long: dict[str, int] = {}
    for path in _sources():
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                lines = (node.end_lineno or node.lineno) - node.lineno + 1
                if lines > MAX_FUNCTION_LINES:
                    too_long[f"{path.relative_to(ROOT)}:{node.name}"] = lines
    assert too_long == {}, "split these into named steps"
