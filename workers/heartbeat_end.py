"""When a heartbeat fire is its last: the completion marker, or the end its policy set.

The completion marker is ``[DONE]`` (any case) as the whole reply or alone on the reply's last
line; anywhere else (``I am [DONE] with step 1``) it is text. The agent may end the heartbeat
that fired it this way, never create or widen one: the marker only clears, and only the
generation that fired (``finish_fire`` checks it). ``times N`` ends with the Nth fire; ``for 7d``
with the last fire whose next due time would come after the end. Either way the notice goes
out with the fire's reply (alone when the reply was silent), so the chat sees the end.

A token budget (``budget 50k``) is spent when the tokens of the heartbeat's runs on this UTC day,
this fire's included, reach it: the fire that reaches or crosses it is delivered with a notice,
and the heartbeat pauses (``paused_reason``) until a person resumes it.
"""

from __future__ import annotations

from hbgw.core.clock import iso
from hbgw.sessions.heartbeat import HeartbeatState
from hbgw.sessions.states import HeartbeatStatus
from hbgw.workers.turn_io import Answer

DONE_MARKER = "[DONE]"
DONE_NOTICE = "♥ Heartbeat ended: the agent marked the task done."


def split_done(reply: str) -> tuple[str, bool]:
    """The reply without its completion marker, and whether it carried one."""
    lines = reply.rstrip().splitlines()
    if lines and lines[-1].strip().upper() == DONE_MARKER:
        return "\n".join(lines[:-1]).rstrip(), True
    return reply, False


def end_notice(state: HeartbeatState, answer: Answer) -> str | None:
    """The notice when this fire ends its heartbeat (``state``: as the fire reserved it)."""
    if HeartbeatStatus(state.status) is not HeartbeatStatus.ACTIVE:
        return None
    if answer.failure is None and split_done(answer.text)[1]:
        return DONE_NOTICE
    times, ends_at = state.policy.times, state.ends_at
    if (times is None and ends_at is None) or state.next_due() is not None:
        return None
    if times is not None and state.fire_count >= times:
        plural = "" if times == 1 else "s"
        return f"♥ Heartbeat ended: it fired {times} time{plural}, as set (times {times})."
    return f"♥ Heartbeat ended: its end ({iso(ends_at)}) comes before the next due time."


def budget_reason(state: HeartbeatState, spent_before: int, answer: Answer) -> str | None:
    """Why this fire pauses its heartbeat: the day's tokens, its own included, reached the
    budget (``state``: as the fire reserved it); None while under it, or with no budget."""
    budget = state.policy.budget
    if budget is None or HeartbeatStatus(state.status) is not HeartbeatStatus.ACTIVE:
        return None
    spent = spent_before + (answer.usage.total_tokens if answer.usage else 0)
    if spent < budget:
        return None
    return f"token budget spent: {spent:,} of {budget:,} tokens today (UTC)"


def budget_notice(reason: str) -> str:
    return f"♥ Heartbeat paused — {reason}; /heartbeat resume starts it again."


def with_notice(text: str, notice: str | None) -> str:
    return text if notice is None else f"{text}\n\n{notice}"
