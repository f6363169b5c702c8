"""Every public method of the store has a caller outside the tests (issue 16: the ledger had
single-step methods only tests called, a second API beside the one the workers use). A method
the product no longer calls is deleted, not kept for a test."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

from hbgw.sessions.store import Store

ROOT = Path(__file__).resolve().parents[2]
PRODUCT = ("beat", "workers", "gateway", "hbgw", "state", "sessions", "core", "chaos", "bench")


def product_source() -> str:
    return "\n".join(
        path.read_text(encoding="utf-8")
        for package in PRODUCT
        for path in sorted((ROOT / package).rglob("*.py"))
    )


def public_methods() -> list[str]:
    """The steps of every part (``store.ledger.begin_fire`` → ``begin_fire``)."""
    return sorted(
        name
        for part in Store.PARTS.values()
        for name, member in inspect.getmembers(part)
        if not name.startswith("_") and callable(member)
    )


def test_every_public_store_method_has_a_caller_outside_the_tests() -> None:
    source = product_source()
    unused = [name for name in public_methods() if not re.search(rf"\.{name}\b", source)]
    assert not unused, f"store methods only tests call (delete them): {unused}"


def test_the_check_sees_the_methods() -> None:
    names = public_methods()
    assert "admit_fires" in names and "create_session" in names
