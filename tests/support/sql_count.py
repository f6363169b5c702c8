"""Counting SQL round trips: transactions and statements an engine runs while a block runs.

Listens to SQLAlchemy's engine events, so every thread's work on that engine counts (the
turn thread's as much as the test's). ``BEGIN`` itself (SQLite's ``BEGIN IMMEDIATE``, sent by
``sessions/db.py``) is a transaction, not a statement.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Engine, event


@dataclass
class SqlCount:
    transactions: int = 0
    statements: int = 0
    rollbacks: int = 0
    lines: list[str] = field(default_factory=list)  # the statements, first words, for messages
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def snapshot(self) -> tuple[int, int]:
        with self._lock:
            return self.transactions, self.statements

    def _begin(self, _conn: Any) -> None:
        with self._lock:
            self.transactions += 1

    def _rollback(self, _conn: Any) -> None:
        with self._lock:
            self.rollbacks += 1

    def _statement(self, _conn: Any, _cursor: Any, statement: str, *_rest: Any) -> None:
        if statement.lstrip().upper().startswith("BEGIN"):
            return
        with self._lock:
            self.statements += 1
            self.lines.append(" ".join(statement.split())[:90])


@contextmanager
def counting_sql(engine: Engine) -> Iterator[SqlCount]:
    """Count what ``engine`` runs inside the block (all threads)."""
    count = SqlCount()
    hooks: list[tuple[str, Callable[..., None]]] = [
        ("begin", count._begin),
        ("rollback", count._rollback),
        ("before_cursor_execute", count._statement),
    ]
    for name, hook in hooks:
        event.listen(engine, name, hook)
    try:
        yield count
    finally:
        for name, hook in hooks:
            event.remove(engine, name, hook)
