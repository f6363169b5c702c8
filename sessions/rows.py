"""Conversions between ORM rows and the plain values the store hands out."""

from __future__ import annotations

from datetime import datetime

from sessions import heartbeat as hb
from sessions.models import ChatSession, Heartbeat, HeartbeatRun, Message
from sessions.views import MessageView, RunView, SessionView


def heartbeat_state(row: Heartbeat) -> hb.HeartbeatState:
    status: hb.Status = "active"
    if row.status == "paused":
        status = "paused"
    elif row.status == "cleared":
        status = "cleared"
    return hb.HeartbeatState(
        prompt=row.prompt,
        schedule=hb.schedule_from_columns(row.interval_seconds, row.cron, row.timezone),
        schedule_text=row.schedule_text,
        status=status,
        anchor=row.anchor_at,
        fire_count=row.fire_count,
        generation=row.generation,
        origin_chat=row.origin_chat,
        origin_thread=row.origin_thread,
        last_fired=row.last_fired_at,
        last_outcome=row.last_outcome,
    )


def apply_state(row: Heartbeat, state: hb.HeartbeatState, now: datetime) -> None:
    row.prompt = state.prompt
    row.interval_seconds, row.cron, row.timezone = hb.schedule_columns(state.schedule)
    row.schedule_text = state.schedule_text
    row.status = state.status
    row.anchor_at = state.anchor
    row.next_due_at = state.next_due()
    row.fire_count = state.fire_count
    row.generation = state.generation
    row.origin_chat = state.origin_chat
    row.origin_thread = state.origin_thread
    row.last_fired_at = state.last_fired
    row.updated_at = now


def session_view(row: ChatSession) -> SessionView:
    return SessionView(
        id=row.id,
        platform=row.platform,
        chat=row.chat,
        thread=row.thread,
        owner=row.owner,
        status=row.status,
        closed_reason=row.closed_reason,
        parent_id=row.parent_id,
        conversation=row.conversation,
        fence=row.fence,
        created_at=row.created_at,
    )


def message_view(row: Message) -> MessageView:
    return MessageView(
        id=row.id,
        session_id=row.session_id,
        conversation=row.conversation,
        role=row.role,
        kind=row.kind,
        text=row.text,
        fire_id=row.fire_id,
        reply_to=row.reply_to,
        state=row.state,
        created_at=row.created_at,
    )


def run_view(row: HeartbeatRun) -> RunView:
    return RunView(
        id=row.id,
        fire_id=row.fire_id,
        heartbeat_id=row.heartbeat_id,
        session_id=row.session_id,
        generation=row.generation,
        fence=row.fence,
        state=row.state,
        due_at=row.due_at,
        reserved_at=row.reserved_at,
        started_at=row.started_at,
        finished_at=row.finished_at,
        worker=row.worker,
        deferred=row.deferred,
        missed=row.missed,
        detail=row.detail,
    )
