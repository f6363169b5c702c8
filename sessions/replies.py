"""The one short, human sentence each heartbeat command answers with."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING
from zoneinfo import ZoneInfo

from hbgw.sessions.grammar import IntervalSchedule, format_interval
from hbgw.sessions.grammar.costs import format_tokens
from hbgw.sessions.heartbeat import HeartbeatState
from hbgw.sessions.heartbeat_view import NO_HEARTBEAT, HeartbeatStatusView
from hbgw.sessions.states import HeartbeatStatus

if TYPE_CHECKING:
    from hbgw.sessions.store.owner_budgets import OwnerBudget

PROMPT_PREVIEW = 60


def preview(prompt: str) -> str:
    flat = " ".join(prompt.split())
    return flat if len(flat) <= PROMPT_PREVIEW else flat[: PROMPT_PREVIEW - 3].rstrip() + "..."


def when(moment: datetime, now: datetime) -> str:
    stamp = moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    seconds = int((moment - now).total_seconds())
    if seconds <= 0:
        return stamp
    return f"{stamp} (in {_rough(seconds)})"


def _end(state: HeartbeatState, now: datetime) -> str:
    """``of 5`` and ``ends …``: how far the heartbeat is from its end, when it has one."""
    times = f" of {state.policy.times}" if state.policy.times else ""
    ends = f", ends {when(state.ends_at, now)}" if state.ends_at else ""
    return times + ends


def _spend(status: HeartbeatStatusView) -> str:
    """``, 1,234 of 50,000 tokens today (UTC, owner default)``: what it spent, when it spends or
    is capped, and whose budget caps it when the heartbeat named none."""
    policy = status.state.policy if status.state else None
    budget = policy.budget if policy else None
    if not budget and not status.tokens_today:
        return ""
    cap = f" of {budget:,}" if budget else ""
    whose = (
        f", {policy.budget_from} default" if policy and budget and not policy.names_budget else ""
    )
    return f", {status.tokens_today:,}{cap} tokens today (UTC{whose})"


def owner_budget_reply(budget: OwnerBudget, operator_default: int | None) -> str:
    """The owner's default budget, and what their heartbeats without a budget of their own get."""
    count = budget.following
    these = f"{count} heartbeat{'' if count == 1 else 's'} without a budget of their own"
    if budget.daily_tokens is not None:
        tokens = format_tokens(budget.daily_tokens)
        return f"Default budget of {budget.owner}: {tokens} tokens per UTC day ({these})."
    fallback = f"the operator's {format_tokens(operator_default)}" if operator_default else "no cap"
    return f"{budget.owner} has no default budget: {fallback} ({these})."


def local_when(moment: datetime, now: datetime, zone: str) -> str:
    """``09:00 tomorrow`` in the active hours' zone: when a window opens, people read the clock
    on their wall, and the day relative to theirs."""
    tz = ZoneInfo(zone)
    local, today = moment.astimezone(tz), now.astimezone(tz).date()
    days = (local.date() - today).days
    day = {0: "today", 1: "tomorrow"}.get(days, f"{local:%a %d %b}")
    return f"{local:%H:%M} {day} ({zone})"


def _rough(seconds: int) -> str:
    """The largest whole unit, rounded down: 'in 1h' reads better than 'in 3725s'."""
    for size, unit in ((86400, "d"), (3600, "h"), (60, "m")):
        if seconds >= size:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


def set_reply(state: HeartbeatState) -> str:
    return f"♥ Heartbeat set ({state.describe()}): {preview(state.prompt)}"


def pause_reply(state: HeartbeatState) -> str:
    return f"♥ Heartbeat paused ({state.describe()}): {preview(state.prompt)}"


def resume_reply(state: HeartbeatState, now: datetime) -> str:
    due = state.next_due()
    tail = f" — next at {when(due, now)}" if due else ""
    return f"♥ Heartbeat resumed ({state.describe()}){tail}: {preview(state.prompt)}"


def clear_reply(state: HeartbeatState) -> str:
    return f"♥ Heartbeat cleared: {preview(state.prompt)}"


def status_reply(status: HeartbeatStatusView, *, estop: bool = False) -> str:
    """``estop``: an emergency stop holds the session, so nothing fires whatever is due."""
    state = status.state
    if status.status == NO_HEARTBEAT or state is None:
        return "No heartbeat in this session — set one with /heartbeat every 10m <instruction>."
    fires = f"fired {state.fire_count} time{'s' if state.fire_count != 1 else ''}"
    outcome = f", last outcome: {state.last_outcome}" if state.last_outcome else ""
    if status.status == HeartbeatStatus.PAUSED:
        why = f" — paused: {state.paused_reason}" if state.paused_reason else ""
        return (
            f"♥ Heartbeat paused ({state.describe()}): {preview(state.prompt)}{why} — {fires}"
            f"{_spend(status)}{outcome}; /heartbeat resume starts it again."
        )
    due = status.next_due
    fires += _end(state, status.now) + _spend(status)
    if due is None and HeartbeatStatus(state.status) is HeartbeatStatus.ACTIVE:
        nxt = "ended (its end came before the next due time; nothing fires)"
    elif estop:
        nxt = "held by an emergency stop (nothing fires until it is lifted)"
    elif status.waiting_for_idle:
        nxt = "due — waiting for the session to go idle"
    elif due is None or status.due_now:
        # Nothing runs (or nobody asked Redis): beat hands it to a worker at its next tick.
        nxt = (
            "due now" if status.busy is None else "due now — a worker takes it at beat's next tick"
        )
    elif state.outside_hours() and state.policy.hours is not None:
        zone = state.policy.hours.timezone
        nxt = f"next at {local_when(due, status.now, zone)} (outside active hours)"
    else:
        nxt = f"next at {when(due, status.now)}"
    tail = f"{fires}{outcome}{_backing_off(state)}"
    return f"♥ Heartbeat ({state.describe()}): {preview(state.prompt)} — {nxt}, {tail}."


def _backing_off(state: HeartbeatState) -> str:
    """``, backing off: every 1h (base 15m)`` while quiet fires stretch the interval."""
    interval, schedule = state.interval_seconds(), state.schedule
    if not state.backing_off() or interval is None or not isinstance(schedule, IntervalSchedule):
        return ""
    base = format_interval(schedule.seconds)
    return f", backing off: every {format_interval(interval)} (base {base})"
