"""Celery tasks. Thin: the turn runner does the work."""

from __future__ import annotations

import logging
from typing import Any

from celery import shared_task

from hbgw.state.dispatch import DRAIN_TASK, FIRE_TASK, context_of
from hbgw.workers.admission import ESTOP


class _QuietHeldDrains(logging.Filter):
    """Celery logs every task that succeeds. A drain held by the emergency stop comes back from
    beat's sweeper about once a second per waiting session; the runner says it once per stop
    (``drain.estop``), so Celery's line for it is dropped."""

    def filter(self, record: logging.LogRecord) -> bool:
        data = getattr(record, "data", None)
        return not (
            isinstance(data, dict)
            and data.get("name") == DRAIN_TASK
            and data.get("return_value") == repr(ESTOP)
        )


_QUIET_HELD_DRAINS = _QuietHeldDrains()
logging.getLogger("celery.app.trace").addFilter(_QUIET_HELD_DRAINS)


@shared_task(name=FIRE_TASK, bind=True)  # type: ignore[untyped-decorator]
def fire_heartbeats(self: Any, fires: list[list[Any]]) -> list[str]:
    """Accept a batch of due heartbeats ([session_id, due_ms] pairs) for this worker."""
    handler = context_of(self.app).turn_handler()
    return handler.accept_fires([(str(s), int(d)) for s, d in fires])


@shared_task(name=DRAIN_TASK, bind=True)  # type: ignore[untyped-decorator]
def drain_inbox(self: Any, session_id: str) -> str:
    """Run the queued user messages of a session."""
    return context_of(self.app).turn_handler().drain(session_id)
