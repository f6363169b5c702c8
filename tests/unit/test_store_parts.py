"""The store is made of parts (issue 16): ``store.sessions``, ``store.ledger``, … each an object
over one shared database, and every public method of a part declares its transaction policy
with ``@transaction`` or ``@transaction(repeatable=True)``, so a new step cannot skip the retry
policy silently (the policy itself: ``tests/integration/test_store_disconnects.py``)."""

from __future__ import annotations

import ast
import inspect
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.seed import T0

from hbgw.core.errors import OutcomeUnknown
from hbgw.sessions.store import Ledger, SessionRecords, Store
from hbgw.sessions.store.base import REPEATABLE, TRANSACTION, Transactions, transaction

OWN = Path(__file__).resolve().parents[2] / "sessions" / "store"


def steps(part: type) -> Iterator[tuple[str, object]]:
    for name, member in inspect.getmembers(part, inspect.isfunction):
        if not name.startswith("_"):
            yield name, member


def undeclared(part: type) -> list[str]:
    return [name for name, member in steps(part) if not getattr(member, TRANSACTION, False)]


def test_every_public_method_of_every_part_declares_its_transaction() -> None:
    missing = {name: undeclared(part) for name, part in Store.PARTS.items() if undeclared(part)}
    assert not missing, (
        f"store steps without @transaction: {missing} — declare each public method "
        "@transaction, or @transaction(repeatable=True) when its second run after a cut-off "
        "COMMIT recognises the first"
    )


def test_the_check_finds_an_undeclared_step() -> None:
    class Careless(Transactions):
        @transaction
        def kept(self) -> None: ...

        def forgot(self) -> None: ...

    assert undeclared(Careless) == ["forgot"]


def test_repeatable_is_what_the_step_declares() -> None:
    assert getattr(Ledger.begin_fire, REPEATABLE) and getattr(Ledger.finish_fire, REPEATABLE)
    assert not getattr(SessionRecords.create_session, REPEATABLE)


def test_a_step_not_declared_repeatable_is_not_repeated_after_a_cut_commit() -> None:
    from sqlalchemy.exc import DBAPIError

    from hbgw.sessions.store.base import _CommitCut

    calls: list[int] = []

    @transaction
    def once() -> None:
        calls.append(1)
        cut = DBAPIError("COMMIT", None, Exception("gone"), connection_invalidated=True)
        raise _CommitCut(cut)

    with pytest.raises(OutcomeUnknown):
        once()
    assert calls == [1]


def test_the_store_is_its_parts_over_one_database(tmp_path: Path) -> None:
    store = Store.from_url(f"sqlite:///{tmp_path / 'parts.sqlite3'}")
    try:
        parts = {name: getattr(store, name) for name in Store.PARTS}
        assert all(isinstance(parts[n], Store.PARTS[n]) for n in parts)
        assert len({id(p.database) for p in parts.values()}) == 1
        flat = {name for name, _ in steps(Store)} - {"from_url", "close"}
        assert not flat, f"steps on Store itself (they belong to a part): {flat}"
        assert store.sessions.create_session(platform="p", chat="c", now=T0).id
    finally:
        store.close()


def test_a_part_does_not_call_another_parts_steps_on_self() -> None:
    """Cross-concern work goes through the part that owns it or a shared row helper; a part
    is made of its own concerns only, so ``self.<another part's step>`` is a leak."""
    owner = {name: part for part, cls in Store.PARTS.items() for name, _ in steps(cls)}
    leaks = []
    for path in sorted(OWN.glob("*.py")):
        for cls in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(cls, ast.ClassDef):
                continue
            mine = {p for p, c in Store.PARTS.items() if cls.name in {k.__name__ for k in c.mro()}}
            if not mine:
                continue  # not a part (``Store`` itself, the views)
            for node in ast.walk(cls):
                if (
                    isinstance(node, ast.Attribute)
                    and isinstance(node.value, ast.Name)
                    and node.value.id == "self"
                    and node.attr in owner
                    and owner[node.attr] not in mine
                ):
                    leaks.append(f"{path.name}: {cls.name} calls self.{node.attr}")
    assert not leaks, leaks
