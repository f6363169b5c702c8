"""Celery tasks. Thin: the turn runner does the work."""

from __future__ import annotations

from typing import Any

from celery import shared_task

from state.dispatch import DRAIN_TASK, FIRE_TASK, context_of


@shared_task(name=FIRE_TASK, bind=True)  # type: ignore[untyped-decorator]
def fire_heartbeats(self: Any, fires: list[list[Any]]) -> list[str]:
    """Accept a batch of due heartbeats ([session_id, due_ms] pairs) for this worker."""
    handler = context_of(self.app).turn_handler()
    return handler.accept_fires([(str(s), int(d)) for s, d in fires])


@shared_task(name=DRAIN_TASK, bind=True)  # type: ignore[untyped-decorator]
def drain_inbox(self: Any, session_id: str) -> str:
    """Run the queued user messages of a session."""
    return context_of(self.app).turn_handler().drain(session_id)
