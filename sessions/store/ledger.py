"""The fire ledger: one row per accepted fire id, reserved → started [→ delivering] → finished,
or given back.

The fire path's own steps (claim + reserve, re-check + start, finish + reply) are folded into one
transaction each in ``fire_turns.py``; this module holds the ledger's other production steps:
the fence claim of a user turn, the fenced marks before a send, the settlement of runs whose
turn was lost or cut off, orphan recovery, and the reads of the CLI, API and audit. Every public
method here has a caller outside the tests (``tests/unit/test_store_surface.py`` checks).

A reservation counts the fire and moves the anchor in the same transaction; a refund puts both
back only while nothing newer happened. Writes of a running turn carry its fence, and nothing
leaves for a platform before a fenced write says so (``mark_delivering``, ``begin_reply``). A
grant's ``claim_fence`` settles what older turns left behind: a reservation is given back, a run
cut off in its turn ends ``failed`` with a ``LostLockDetail``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from hbgw.core.errors import InvalidState
from hbgw.sessions.models import MessageRow, RunRow
from hbgw.sessions.states import IN_TURN, DeliveryState, MessageState, RefundReason, RunState
from hbgw.sessions.store import fire_rows as rows
from hbgw.sessions.store import ledger_sql as sql
from hbgw.sessions.store.base import (
    Transactions,
    fenced_session_row,
    run_row,
    session_row,
    transaction,
)
from hbgw.sessions.store.deliveries import (
    DeliveryView,
    Outbound,
    Owner,
    deliveries_of_runs,
    delivery_values,
    mark_pending_in,
    take_back_in,
)
from hbgw.sessions.store.delivery_retries import due_retries_in
from hbgw.sessions.store.heartbeat_records import user_spoke_in
from hbgw.sessions.store.ledger_audit import HeartbeatSnapshot, LedgerSnapshot, read_snapshot
from hbgw.sessions.store.ledger_steps import refund_run, settle_lost_run
from hbgw.sessions.store.message_records import MessageKey
from hbgw.sessions.store.run_views import (
    Duplicate,
    RefusalReason,
    Refused,
    ReplyStart,
    Reserved,
    ReserveOutcome,
    RunKey,
    RunView,
    run_view,
)


@dataclass(frozen=True)
class FenceClaim:
    """A grant's fence is claimed: ``unknown`` deliveries of older turns were found cut off;
    ``retries``: the session's delivery retries due now (oldest first)."""

    unknown: int
    retries: list[DeliveryView] = field(default_factory=list)


__all__ = [
    "Duplicate",
    "FenceClaim",
    "FireLedger",
    "HeartbeatSnapshot",
    "LedgerSnapshot",
    "RefusalReason",
    "Refused",
    "ReplyStart",
    "ReserveOutcome",
    "Reserved",
    "RunKey",
    "RunView",
    "run_view",
]


class FireLedger(Transactions):
    @transaction(repeatable=True)
    def mark_delivering(
        self, run_key: RunKey, fence: int, now: datetime, *, channel: str, kind: str
    ) -> RunView:
        """The fenced step just before a reply leaves: a turn that lost its lock sends nothing.
        The run's delivery record (key: the fire id) is written ``pending`` with it.

        Raises ``StaleFence`` when a newer grant holds the session (which settled this run).
        """
        with self._transaction() as db:
            conn = rows.on(db, writes=True)
            run = rows.run_with_fence(conn, run_key, fence)
            if run.state == RunState.DELIVERING and run.fence == fence:
                return rows.run_view_of(run)  # a repeat after a COMMIT whose answer was lost
            if run.state != RunState.STARTED:
                raise InvalidState(
                    f"Run {run.fire_id} is {run.state}; only a started run delivers."
                )
            conn.execute(sql.MARK_DELIVERING, rows.key_params(run_key))
            owner = Owner(run.session_id, fence, channel, run_id=run_key.id)
            record = delivery_values(
                owner, Outbound(run.fire_id, kind), DeliveryState.PENDING, 1, now
            )
            conn.execute(sql.INSERT_DELIVERY, record)
            return rows.run_view_of(run, state=RunState.DELIVERING)

    @transaction(repeatable=True)
    def settle_lost(
        self, run_key: RunKey, fence: int, now: datetime, *, nothing_sent: bool = False
    ) -> RunView | None:
        """A turn noticed it lost its lock: end its run ``failed`` while no newer grant did.

        Fenced: ``StaleFence`` means a newer grant exists, and its claim settled the run already.
        None when the run is no longer in its turn. ``nothing_sent``: the turn knows its reply
        never left (it stopped at the last check before the send), even from ``delivering``.
        """
        with self._transaction() as db:
            run = run_row(db, run_key)
            fenced_session_row(db, run.session_id, fence)
            if run.state not in IN_TURN:
                return None
            settle_lost_run(db, run, now, nothing_sent=nothing_sent)
            return run_view(run)

    @transaction(repeatable=True)
    def begin_reply(
        self,
        session_id: str,
        message_key: MessageKey,
        fence: int,
        now: datetime,
        *,
        channel: str,
        outbound: Sequence[Outbound],
    ) -> ReplyStart | None:
        """The fenced, durable step just before a reply to a user message leaves.

        Raises ``StaleFence`` unless ``fence`` is the session's newest; None when the message was
        answered already (nothing to send). Otherwise the message records that the grant
        ``fence`` is answering it, so a later grant that finds the mark of an older one (and no
        reply) knows that one's outcome is unknown: it may have sent its reply. Each of
        ``outbound`` (the notices, then the reply) gets its delivery record ``pending``. The user
        spoke: a heartbeat backing off snaps back (``snapped``, with its ``next_due``).
        """
        with self._transaction() as db:
            session = fenced_session_row(db, session_id, fence)
            message = db.get(MessageRow, message_key)
            if message is None or message.state != MessageState.QUEUED:
                return None
            earlier = message.delivering_fence
            message.delivering_fence = fence
            owner = Owner(session_id, fence, channel, message_id=message_key.id)
            unknown = mark_pending_in(db, owner, outbound, now)
            snapped = user_spoke_in(db, session, now)
            # The same fence again is this grant's own repeat after a lost COMMIT.
            return ReplyStart(
                possible_repeat=earlier is not None and earlier != fence,
                earlier=earlier,
                unknown=unknown,
                snapped=snapped is not None,
                next_due=snapped.next_due if snapped else None,
            )

    @transaction
    def drop_reply_mark(
        self,
        message_key: MessageKey,
        fence: int,
        earlier: int | None,
        now: datetime,
        *,
        unsent: Sequence[str],
        nothing_sent: bool,
    ) -> None:
        """Take back what ``begin_reply`` marked when the grant ``fence`` stopped before its
        sends (its lock not confirmed in time): the records of the deliveries ``unsent`` are
        no attempt; and when ``nothing_sent``, the message's mark too, so the next grant's
        reply is no false "possible repeat". Only while the mark is still this grant's and the
        message unanswered; ``earlier`` (an older grant's mark, whose outcome is still unknown)
        is put back."""
        with self._transaction() as db:
            message = db.get(MessageRow, message_key, with_for_update=True)
            if message is None or message.state != MessageState.QUEUED:
                return
            if message.delivering_fence != fence:
                return
            if nothing_sent:
                message.delivering_fence = earlier
            take_back_in(db, message_key.id, fence, unsent, now, earlier=earlier is not None)

    @transaction
    def refund_orphan(self, run_key: RunKey, now: datetime) -> RunView | None:
        """Refund a reservation whose worker died before the agent started; None if it moved on."""
        with self._transaction() as db:
            run = run_row(db, run_key)
            if run.state != RunState.RESERVED:
                return None
            refund_run(db, run, RefundReason.ORPHANED, now)
            return run_view(run)

    @transaction
    def settle_cut_off(self, run_key: RunKey, now: datetime) -> RunView | None:
        """End ``failed`` a run whose turn was cut off and whose session got no grant since;
        None if it moved on (finished, or a newer grant settled it)."""
        with self._transaction() as db:
            run = run_row(db, run_key)
            session = session_row(db, run.session_id, for_update=True)
            if run.state not in IN_TURN or run.fence != session.fence:
                return None
            settle_lost_run(db, run, now, cut_off=True)
            return run_view(run)

    @transaction
    def stale_turns(self, before: datetime, limit: int | None = None) -> list[RunView]:
        """Runs still in their turn (started or delivering) since before ``before``, oldest
        first: candidates for ``settle_cut_off``; at most ``limit``."""
        with self._transaction() as db:
            rows = db.scalars(
                select(RunRow)
                .where(RunRow.state.in_(IN_TURN), RunRow.started_at < before)
                .order_by(RunRow.started_at, RunRow.id)
                .limit(limit)
            )
            return [run_view(r) for r in rows]

    @transaction
    def stale_reservations(self, before: datetime, limit: int | None = None) -> list[RunView]:
        """Runs still ``reserved`` since before ``before``, oldest first: candidates for
        ``refund_orphan``; at most ``limit`` (the rest on a later pass)."""
        with self._transaction() as db:
            rows = db.scalars(
                select(RunRow)
                .where(RunRow.state == RunState.RESERVED, RunRow.reserved_at < before)
                .order_by(RunRow.reserved_at, RunRow.id)
                .limit(limit)
            )
            return [run_view(r) for r in rows]

    @transaction
    def claim_fence(
        self, session_id: str, fence: int, now: datetime, *, retries: int = 0
    ) -> FenceClaim:
        """A lock was granted: record its fence, so every write of older turns is rejected.

        Claimed once per grant, before anything runs under the lock; every later write of the
        turn (reservation included) must carry exactly this fence. What older turns left is
        settled here, in the same transaction: the lock moved on, so they are over. The claim
        says how many deliveries of older turns it found cut off (now ``unknown``) and, when
        ``retries`` is above 0, up to that many of the session's delivery retries now due.
        """
        with self._transaction() as db:
            _session, unknown = rows.claim(db, session_id, fence, now)
            due = due_retries_in(db, session_id, now, retries) if retries else []
            return FenceClaim(unknown, due)

    @transaction
    def runs(self, session_id: str | None = None) -> list[RunView]:
        """Runs, oldest first, each with its delivery record (if it has one)."""
        with self._transaction() as db:
            query = select(RunRow).order_by(RunRow.id)
            if session_id is not None:
                query = query.where(RunRow.session_id == session_id)
            return _with_deliveries(db, [run_view(r) for r in db.scalars(query)])

    @transaction
    def runs_page(self, session_id: str, *, limit: int, before: int | None = None) -> list[RunView]:
        """The session's newest ``limit`` runs with an id below ``before``, oldest first: one
        LIMITed query (an index on session_id), never the whole ledger."""
        query = select(RunRow).where(RunRow.session_id == session_id)
        if before is not None:
            query = query.where(RunRow.id < before)
        with self._transaction() as db:
            rows = list(db.scalars(query.order_by(RunRow.id.desc()).limit(limit)))
            return _with_deliveries(db, [run_view(r) for r in reversed(rows)])

    @transaction
    def audit_snapshot(self) -> LedgerSnapshot:
        """Everything the invariant check compares, read from one snapshot of the database."""
        with self._transaction() as db:
            return read_snapshot(db)

    @transaction
    def max_fence(self, session_id: str) -> int:
        """The highest fence SQL knows for the session: what Redis reseeds from."""
        with self._transaction() as db:
            session = session_row(db, session_id)
            ledger = db.scalar(
                select(func.max(RunRow.fence)).where(RunRow.session_id == session_id)
            )
            return max(session.fence, ledger or 0)


def _with_deliveries(db: Session, runs: list[RunView]) -> list[RunView]:
    """The runs with their delivery records, read in one more query."""
    found = deliveries_of_runs(db, [r.id for r in runs])
    return [dataclasses.replace(r, delivery=found.get(r.id)) for r in runs]
