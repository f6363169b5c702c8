"""The test suite's own rule: shared code lives in tests/support, test modules stand alone."""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).parent


def imported_modules(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module.split(".")[0])
    return names


def test_no_test_module_imports_another_module_of_tests() -> None:
    siblings = {p.stem for p in TESTS.glob("*.py")}
    offenders = {
        path.name: sorted(imported_modules(path) & siblings)
        for path in sorted(TESTS.glob("*.py"))
        if imported_modules(path) & siblings
    }
    assert offenders == {}, "import shared helpers from tests/support instead"


def test_support_imports_no_test_module() -> None:
    siblings = {p.stem for p in TESTS.glob("*.py")}
    for path in (TESTS / "support").glob("*.py"):
        assert not imported_modules(path) & siblings, path.name
