"""Secrets the deployment makes for itself and keeps in SQL, where every replica reads the same
one: the first process that asks for a secret makes it at random, and every other — racing or
later, on any replica — reads that one (``INSERT … ON CONFLICT DO NOTHING``, then a read: the
primary key lets exactly one insert win)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from secrets import token_hex

from sqlalchemy import select
from sqlalchemy.dialects import postgresql, sqlite

from hbgw.sessions.models import StoredSecretRow
from hbgw.sessions.store.base import Transactions, transaction

SECRET_BYTES = 32  # 256 bits of randomness, kept as 64 hex characters

# ON CONFLICT is each dialect's own construct in SQLAlchemy (as ``job_sql.RUN_SESSION``).
_INSERT: dict[str, Callable[[type[StoredSecretRow]], postgresql.Insert | sqlite.Insert]] = {
    "postgresql": postgresql.insert,
    "sqlite": sqlite.insert,
}


class StoredSecrets(Transactions):
    @transaction(repeatable=True)  # made once: a repeat reads the one that was made
    def stored_secret(self, name: str, now: datetime) -> str:
        """The secret ``name``, made now when no process has made it yet; the same for every
        caller from then on."""
        with self._transaction() as db:
            kept = select(StoredSecretRow.value).where(StoredSecretRow.name == name)
            found = db.scalars(kept).first()
            if found is not None:
                return found
            insert = _INSERT[db.get_bind().dialect.name](StoredSecretRow)
            made = {"name": name, "value": token_hex(SECRET_BYTES), "created_at": now}
            db.execute(insert.values(**made).on_conflict_do_nothing(index_elements=["name"]))
            # Ours, or the one a racing process committed first (ours then inserted nothing).
            return db.scalars(kept).one()
