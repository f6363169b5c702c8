"""The test suite's own rules: every test module lives in the tier that says what it needs
(``unit``, ``integration``, ``e2e``), shared code lives in tests/support, and test modules stand
alone."""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
TIERS = ("unit", "integration", "e2e")


def imported_modules(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module.split(".")[0])
    return names


def all_test_modules() -> list[Path]:
    return sorted(path for tier in TIERS for path in (TESTS / tier).glob("test_*.py"))


def test_every_test_module_is_in_a_tier() -> None:
    stray = sorted(p.name for p in TESTS.rglob("test_*.py") if p.parent.name not in TIERS)
    assert stray == [], "put each test module in tests/unit, tests/integration or tests/e2e"
    assert len(all_test_modules()) > 150


def test_module_names_are_unique_across_tiers() -> None:
    """Without packages, pytest imports each test module by its bare name."""
    names = [p.name for p in all_test_modules()]
    assert len(names) == len(set(names))


def test_no_test_module_imports_another_module_of_tests() -> None:
    siblings = {p.stem for p in all_test_modules()}
    offenders = {
        path.name: sorted(imported_modules(path) & siblings)
        for path in all_test_modules()
        if imported_modules(path) & siblings
    }
    assert offenders == {}, "import shared helpers from tests/support instead"


def test_support_imports_no_test_module() -> None:
    siblings = {p.stem for p in all_test_modules()}
    for path in (TESTS / "support").glob("*.py"):
        assert not imported_modules(path) & siblings, path.name
