"""What every part of the store shares: the transaction policy of its steps, and row lookups.

The store is made of parts (``store.sessions``, ``store.ledger``, …, see ``__init__``), each an
object over one shared ``Database``. Every public method of a part is one transaction and says
so with ``@transaction``: it is repeated, as a whole, when the database connection dropped
before COMMIT (the server rolled the transaction back, so running it again is safe). A drop
*during* COMMIT is ambiguous (it may have been saved): only steps declared
``@transaction(repeatable=True)`` (their second run recognises the first) are repeated after
one; any other raises ``OutcomeUnknown``. SQLite's "database is locked" (another connection
held the write lock for longer than the busy timeout) is transient the same way: nothing was
written, so the whole transaction is repeated, the same bounded number of times. Raw SQLAlchemy
errors never leave the store: they become ``StoreError`` with one sentence.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from datetime import date
from typing import Any, ParamSpec, TypeVar, overload

from sqlalchemy import Engine, event, exists, select
from sqlalchemy.exc import DBAPIError, OperationalError, SQLAlchemyError
from sqlalchemy.orm import ORMExecuteState, Session, sessionmaker

from hbgw.core.clock import pause
from hbgw.core.errors import InvalidState, NotFound, OutcomeUnknown, StaleFence, StoreError
from hbgw.sessions.heartbeat_view import no_session
from hbgw.sessions.models import HeartbeatRow, JobRow, RunRow, SessionRow
from hbgw.sessions.quotas import OwnerQuotas
from hbgw.sessions.states import SessionStatus

log = logging.getLogger("hbgw.store")

ATTEMPTS = 3
BACKOFF = 0.1  # seconds before the second attempt, doubled before the third

P = ParamSpec("P")
R = TypeVar("R")

# Set on a step by ``transaction``: the test of the parts finds every public method carries it.
TRANSACTION = "_hbgw_transaction"
REPEATABLE = "_hbgw_repeatable"


@overload
def transaction(method: Callable[P, R], /) -> Callable[P, R]: ...
@overload
def transaction(*, repeatable: bool = False) -> Callable[[Callable[P, R]], Callable[P, R]]: ...
def transaction(
    method: Callable[P, R] | None = None, /, *, repeatable: bool = False
) -> Callable[P, R] | Callable[[Callable[P, R]], Callable[P, R]]:
    """Declare a public method of a store part one transaction, with the store's retry policy.

    A failure before COMMIT (a dropped connection, SQLite's "database is locked") is repeated
    as a whole, up to ``ATTEMPTS`` times: the server rolled it back. ``repeatable=True`` says
    the step is also safe to repeat after a *cut-off COMMIT* — the connection dropped while
    committing, so the first run may or may not be saved — because its second run recognises
    a saved first one and changes nothing more (a fire id already begun, a turn already
    finished, the same value set twice). Without it, a cut COMMIT raises ``OutcomeUnknown``
    and the caller must check before trying again.
    """

    def declare(step: Callable[P, R]) -> Callable[P, R]:
        return _retrying(step, repeat_after_commit=repeatable)

    return declare if method is None else declare(method)


class _CommitCut(Exception):
    """The connection dropped during COMMIT of a transaction that wrote."""

    def __init__(self, cause: DBAPIError) -> None:
        super().__init__(str(cause.orig or cause))
        self.cause = cause


def _dropped(exc: BaseException) -> bool:
    return isinstance(exc, DBAPIError) and bool(exc.connection_invalidated)


def _locked(exc: BaseException) -> bool:
    """SQLite's busy answer: the write lock stayed taken past the busy timeout."""
    if not isinstance(exc, OperationalError):
        return False
    text = str(exc.orig or exc).lower()
    return "database is locked" in text or "database is busy" in text


def _transient(exc: BaseException) -> bool:
    return _dropped(exc) or _locked(exc)


def _cause(exc: BaseException) -> str:
    orig = getattr(exc, "orig", None) or exc
    return " ".join(str(orig).split()) or type(orig).__name__


class Database:
    """The engine and the one ORM session factory that every part of a store shares."""

    def __init__(self, engine: Engine, quotas: OwnerQuotas | None = None) -> None:
        self.engine = engine
        self.quotas = quotas or OwnerQuotas()
        """The per-owner quotas the steps that add a session, heartbeat or job check."""
        self._make_orm_session = sessionmaker(engine, expire_on_commit=False)
        event.listen(self._make_orm_session, "after_flush", _note_write)
        event.listen(self._make_orm_session, "do_orm_execute", _note_dml)

    @contextmanager
    def transaction(self) -> Iterator[Session]:
        # Leaving the ``with`` by an exception closes the session, which rolls back.
        with self._make_orm_session() as db:
            db.begin()
            yield db
            # Flushed here, so a failure of the statements themselves is a plain, repeatable
            # failure; only the COMMIT below is ambiguous.
            db.flush()
            try:
                db.commit()
            except DBAPIError as exc:
                if _dropped(exc) and db.info.get("wrote"):
                    raise _CommitCut(exc) from exc
                raise


class Transactions:
    """The base of every store part: ``_transaction()`` is the only way to reach the rows, and
    each public method is a step declared with ``@transaction``."""

    def __init__(self, database: Database) -> None:
        self.database = database
        self.engine = database.engine
        self.quotas = database.quotas

    def _transaction(self) -> AbstractContextManager[Session]:
        return self.database.transaction()


def _note_write(db: Session, _context: Any) -> None:
    db.info["wrote"] = True


def _note_dml(state: ORMExecuteState) -> None:
    if state.is_insert or state.is_update or state.is_delete:
        state.session.info["wrote"] = True


def _retrying(method: Callable[P, R], *, repeat_after_commit: bool) -> Callable[P, R]:
    what = method.__name__

    @functools.wraps(method)
    def run(*args: P.args, **kwargs: P.kwargs) -> R:
        for attempt in range(1, ATTEMPTS + 1):
            try:
                return method(*args, **kwargs)
            except _CommitCut as exc:
                if not repeat_after_commit:
                    raise OutcomeUnknown(
                        f"The database connection dropped while committing {what}: the change "
                        f"may or may not be saved ({exc}) — check it before trying again."
                    ) from exc.cause
                failure: Exception = exc
            except SQLAlchemyError as exc:
                if not _transient(exc) or attempt == ATTEMPTS:
                    raise _store_error(what, exc, attempt) from exc
                failure = exc
            log.warning(
                "store: %s %s, attempt %d of %d: %s",
                what,
                "found the database locked" if _locked(failure) else "lost its database connection",
                attempt,
                ATTEMPTS,
                _cause(failure),
                extra={"action": "store.retry"},
            )
            pause(BACKOFF * 2 ** (attempt - 1))
        raise AssertionError("unreachable: the last attempt returns or raises")

    setattr(run, TRANSACTION, True)
    setattr(run, REPEATABLE, repeat_after_commit)
    return run


def _store_error(what: str, exc: SQLAlchemyError, attempts: int) -> StoreError:
    if _locked(exc):
        return StoreError(
            f"The database stayed locked by another writer during {what}, {attempts} times "
            f"in a row ({_cause(exc)}) — check for a process holding a long write "
            "transaction on the SQLite file, or move to PostgreSQL for this load."
        )
    if _dropped(exc):
        return StoreError(
            f"The database connection dropped during {what} {attempts} times in a row "
            f"({_cause(exc)}) — check that the database is up and reachable."
        )
    return StoreError(
        f"The database failed during {what}: {_cause(exc)} — check the database and "
        "HBGW_DATABASE_URL."
    )


def session_row(db: Session, session_id: str, *, for_update: bool = False) -> SessionRow:
    query = select(SessionRow).where(SessionRow.id == session_id)
    if for_update:
        query = query.with_for_update()
    row = db.scalars(query).first()
    if row is None:
        raise no_session(session_id)
    return row


def active_session_row(db: Session, session_id: str, verb: str) -> SessionRow:
    """The session, locked, if it is active; ``verb`` names the refused action."""
    row = session_row(db, session_id, for_update=True)
    if row.status != SessionStatus.ACTIVE:
        reason = f" ({row.closed_reason})" if row.closed_reason else ""
        raise InvalidState(f"Cannot {verb} session {session_id}: it is {row.status}{reason}.")
    return row


def fenced_session_row(db: Session, session_id: str, fence: int) -> SessionRow:
    """The session, locked, if ``fence`` is still its newest: a turn that lost its lock fails."""
    row = session_row(db, session_id, for_update=True)
    if row.fence != fence:
        raise StaleFence(
            f"Session {session_id} is now fenced at {row.fence}; a write with fence "
            f"{fence} comes from a turn that lost its lock and is rejected."
        )
    return row


def heartbeat_row(db: Session, session_id: str, *, for_update: bool = False) -> HeartbeatRow | None:
    query = select(HeartbeatRow).where(HeartbeatRow.session_id == session_id)
    if for_update:
        query = query.with_for_update()
    return db.scalars(query).first()


def run_row(db: Session, run_key: tuple[int, date]) -> RunRow:
    """The run of ``run_key`` (``RunKey``: id and fire day, the ORM's identity of a run), locked."""
    run = db.get(RunRow, run_key, with_for_update=True)
    if run is None:
        raise NotFound(f"There is no run {run_key[0]}.")
    return run


def a_job_runs_own_session() -> Any:
    """True for a session made for one run of a routed job (its ledger row names the job, and
    the job names no session of its own)."""
    return exists().where(
        RunRow.session_id == SessionRow.id,
        RunRow.job_id == JobRow.id,
        JobRow.session_id.is_(None),
    )
