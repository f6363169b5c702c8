"""An owner's default token budget: the budget of each of the owner's heartbeats that names
none of its own (docs/contract.md "Policies"; precedence in ``grammar.costs.BudgetSource``).

The budget that applies is written on the heartbeat row itself (``daily_tokens`` and
``budget_source``), when the heartbeat is set and again here when the owner's default changes:
the fire path reads the row it reads anyway, and no fire pays a query for a default.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime

from sqlalchemy import ColumnElement, func, or_, select, update
from sqlalchemy.orm import Session

from hbgw.sessions.grammar.costs import BudgetSource
from hbgw.sessions.grammar.policy import Policy
from hbgw.sessions.models import HeartbeatRow, OwnerBudgetRow, SessionRow
from hbgw.sessions.states import HeartbeatStatus
from hbgw.sessions.store.base import Transactions, transaction
from hbgw.sessions.validation import OWNER_CHARS, check_name


@dataclass(frozen=True)
class OwnerBudget:
    """An owner's default (None: none) and how many live heartbeats follow it now."""

    owner: str
    daily_tokens: int | None
    following: int

    def to_json(self) -> dict[str, object]:
        return {
            "owner": self.owner,
            "daily_tokens": self.daily_tokens,
            "heartbeats_following": self.following,
        }


def with_owner_budget(db: Session, owner: str | None, policy: Policy) -> Policy:
    """``policy`` with the owner's default budget, when the owner has one (the policy names no
    budget of its own: the caller asks only then)."""
    row = db.get(OwnerBudgetRow, owner) if owner else None
    if row is None:
        return policy
    return replace(policy, budget=row.daily_tokens, budget_from=BudgetSource.OWNER)


def _owners_followers(owner: str) -> list[ColumnElement[bool]]:
    """The owner's live heartbeats whose budget is not their own: each follows the default."""
    return [
        HeartbeatRow.session_id.in_(select(SessionRow.id).where(SessionRow.owner == owner)),
        HeartbeatRow.status != HeartbeatStatus.CLEARED,
        or_(
            HeartbeatRow.daily_tokens.is_(None),
            HeartbeatRow.budget_source.in_([BudgetSource.OWNER, BudgetSource.OPERATOR]),
        ),
    ]


class OwnerBudgets(Transactions):
    @transaction
    def owner_budget(self, owner: str) -> OwnerBudget:
        check_name(owner, "owner", OWNER_CHARS)
        with self._transaction() as db:
            row = db.get(OwnerBudgetRow, owner)
            return OwnerBudget(owner, row.daily_tokens if row else None, _count(db, owner))

    @transaction(repeatable=True)  # the same default twice leaves the same rows
    def set_owner_budget(
        self, owner: str, tokens: int | None, operator_default: int | None, now: datetime
    ) -> OwnerBudget:
        """Make ``tokens`` (None: none) the owner's default and apply it at once to every live
        heartbeat of theirs without a budget of its own; with none, they go back to
        ``operator_default`` (HBGW_HEARTBEAT_DAILY_TOKENS; None: no cap)."""
        check_name(owner, "owner", OWNER_CHARS)
        with self._transaction() as db:
            row = db.get(OwnerBudgetRow, owner, with_for_update=True)
            if tokens is None and row is not None:
                db.delete(row)
            elif tokens is not None and row is None:
                db.add(OwnerBudgetRow(owner=owner, daily_tokens=tokens, updated_at=now))
            elif tokens is not None and row is not None:
                row.daily_tokens, row.updated_at = tokens, now
            db.flush()
            budget = tokens if tokens is not None else operator_default
            source = BudgetSource.OWNER if tokens is not None else BudgetSource.OPERATOR
            db.execute(
                update(HeartbeatRow)
                .where(*_owners_followers(owner))
                .values(
                    daily_tokens=budget,
                    budget_source=None if budget is None else source,
                    updated_at=now,
                ),
                execution_options={"synchronize_session": False},
            )
            return OwnerBudget(owner, tokens, _count(db, owner))


def _count(db: Session, owner: str) -> int:
    query = select(func.count()).select_from(HeartbeatRow).where(*_owners_followers(owner))
    return int(db.scalar(query) or 0)
