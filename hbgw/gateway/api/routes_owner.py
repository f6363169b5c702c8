"""An owner's default token budget: ``/v1/owners/{owner}/budget`` (GET, PUT, DELETE).

It caps each of the owner's heartbeats that names no budget of its own (docs/contract.md
"Policies"). An owner's token reaches its own owner only — another owner answers ``404``, like
another owner's session, so owners cannot be probed; the admin token reaches every owner. A
budget that is none is ``422`` with the grammar's sentence.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from hbgw.gateway.api.auth import Principal
from hbgw.gateway.api.context import ApiContext
from hbgw.gateway.api.errors import ApiError
from hbgw.gateway.api.routes_sessions import Ctx, Who
from hbgw.gateway.api.schemas import OwnerBudgetSpec, errors
from hbgw.sessions import replies
from hbgw.sessions.grammar.costs import parse_default_budget
from hbgw.sessions.store.owner_budgets import OwnerBudget

router = APIRouter(prefix="/v1/owners/{owner}/budget", tags=["owners"])


def _reachable(who: Principal, owner: str) -> str:
    if not (who.admin or who.owner == owner):
        raise ApiError(404, "not_found", f"There is no owner {owner} for this token.")
    return owner


def _shown(ctx: ApiContext, budget: OwnerBudget) -> dict[str, Any]:
    operator = ctx.settings.heartbeat_daily_tokens
    return {
        **budget.to_json(),
        "operator_daily_tokens": operator,
        "reply": replies.owner_budget_reply(budget, operator),
    }


@router.get("", responses=errors(404))
def show(owner: str, ctx: Ctx, who: Who) -> dict[str, Any]:
    """The owner's default (``daily_tokens``, null: none) and the operator's."""
    return _shown(ctx, ctx.store.heartbeats.owner_budget(_reachable(who, owner)))


@router.put("", responses=errors(404))
def put(owner: str, body: OwnerBudgetSpec, ctx: Ctx, who: Who) -> dict[str, Any]:
    """Set the default; the owner's heartbeats without a budget of their own follow at once."""
    tokens = parse_default_budget(str(body.daily_tokens))
    if tokens is None:
        raise ApiError(
            422, "invalid_input", "To remove the default budget, DELETE it; PUT takes tokens."
        )
    return _set(ctx, _reachable(who, owner), tokens)


@router.delete("", responses=errors(404))
def delete(owner: str, ctx: Ctx, who: Who) -> dict[str, Any]:
    """Remove the default: those heartbeats go back to HBGW_HEARTBEAT_DAILY_TOKENS (or none)."""
    return _set(ctx, _reachable(who, owner), None)


def _set(ctx: ApiContext, owner: str, tokens: int | None) -> dict[str, Any]:
    operator = ctx.settings.heartbeat_daily_tokens
    return _shown(ctx, ctx.store.heartbeats.set_owner_budget(owner, tokens, operator, ctx.clock()))
