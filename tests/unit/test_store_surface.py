"""The store's public surface is what production calls (issue 16): a public method of ``Store``
that only tests call is a second API to keep true, so it fails here. Tests build their states
with the production steps instead (``support.fires``).

A caller is an attribute access ``<…store…>.name`` (called or passed on) in the source of the
production packages outside ``sessions/store/`` itself: production code reaches the store
through a name that says so (``store.ledger``, ``rt.store.jobs``, ``open_store()``), or, when a
unit is handed one part, through the part's name (``self.ledger``, ``restore``).
"""

from __future__ import annotations

import ast
import inspect
from collections.abc import Iterator
from pathlib import Path

from hbgw.sessions.store import Store

ROOT = Path(__file__).resolve().parents[2]
PRODUCTION = ["core", "sessions", "state", "beat", "workers", "gateway", "hbgw", "chaos", "bench"]
OWN = ROOT / "sessions" / "store"

# A public method no production package calls, kept because it is a documented API of an
# operator tool: name → the tool and the doc that names it. Keep this short; empty is best.
OPERATOR_API: dict[str, str] = {}


def public_methods() -> set[str]:
    return {
        name
        for part in Store.PARTS.values()
        for name, member in inspect.getmembers(part)
        if not name.startswith("_") and callable(member) and not hasattr(object, name)
    }


def production_sources() -> Iterator[Path]:
    for package in PRODUCTION:
        for path in sorted((ROOT / package).rglob("*.py")):
            if OWN not in path.parents:
                yield path


def names_the_store(node: ast.expr) -> bool:
    """The store (``rt.store.ledger``) or one of its parts, which a unit handed only that part
    names after it (``self.ledger``, ``restore``)."""
    if "store" in ast.unparse(node).lower():
        return True
    last = node.attr if isinstance(node, ast.Attribute) else getattr(node, "id", "")
    return last.lstrip("_") in Store.PARTS


def store_attributes(path: Path) -> Iterator[str]:
    """Attribute names read from an expression that names the store or a part of it."""
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Attribute) and names_the_store(node.value):
            yield node.attr


def called_in_production() -> set[str]:
    return {name for path in production_sources() for name in store_attributes(path)}


def test_every_public_store_method_has_a_production_caller() -> None:
    uncalled = public_methods() - called_in_production() - set(OPERATOR_API)
    assert not uncalled, (
        f"Store methods no production package calls: {sorted(uncalled)} — delete them and "
        "build the test's state with the production steps (tests/support/fires.py), or, for "
        "an operator tool's documented API, add them to OPERATOR_API with the reason."
    )


def test_the_allowlist_names_real_uncalled_methods() -> None:
    """An entry whose method is gone, or has a caller now, is taken out."""
    stale = {n for n in OPERATOR_API if n not in public_methods() or n in called_in_production()}
    assert not stale, f"OPERATOR_API entries to remove: {sorted(stale)}"


def test_the_scan_sees_the_callers_it_should() -> None:
    """The scan itself works: the fire path's steps are found, a made-up name is not."""
    found = called_in_production()
    assert {"begin_fire", "finish_fire", "restorable_page"} <= found
    assert "no_such_method" not in found
