"""Views to JSON, through their own ``to_json()`` when they have one, so what a view gains
(token usage, for instance) reaches the API without a change here."""

from __future__ import annotations

import dataclasses
from datetime import datetime
from enum import Enum
from typing import Any

from hbgw.core.clock import iso
from hbgw.gateway.public_ids import PublicIds
from hbgw.sessions.views import MessageView, SessionView
from hbgw.workers.injection import is_silent


def view_json(view: Any) -> dict[str, Any]:
    to_json = getattr(view, "to_json", None)
    if callable(to_json):
        data = to_json()
        assert isinstance(data, dict)
        return data
    return {f.name: _plain(getattr(view, f.name)) for f in dataclasses.fields(view)}


def _plain(value: Any) -> Any:
    if isinstance(value, datetime):
        return iso(value)
    if isinstance(value, Enum):
        return value.value
    return value


def session_json(session: SessionView) -> dict[str, Any]:
    return {"id": session.id, **view_json(session)}


def is_heartbeat(message: MessageView) -> bool:
    """The heartbeat prompt, and what a heartbeat turn answered."""
    return message.kind == "heartbeat" or (message.role == "assistant" and bool(message.fire_id))


def is_silent_answer(message: MessageView) -> bool:
    """A heartbeat turn's silence marker: stored for the record, never delivered to the chat."""
    return message.role == "assistant" and bool(message.fire_id) and is_silent(message.text)


def message_json(message: MessageView, ids: PublicIds) -> dict[str, Any]:
    """The message with its public ids (``public_ids``), never SQL's sequential ones."""
    return {
        **view_json(message),
        "id": ids.show(message.id),
        "reply_to": ids.show(message.reply_to),
        "heartbeat": is_heartbeat(message),
        "silent": is_silent_answer(message),
    }


def run_json(run: Any, ids: PublicIds) -> dict[str, Any]:
    data = view_json(run)
    return {**data, "id": ids.show(run.id), "heartbeat_id": ids.show(data.get("heartbeat_id"))}
