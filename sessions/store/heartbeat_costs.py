"""What a heartbeat spent: the tokens of its runs in the ledger, per UTC day.

A run counts on the UTC day it was reserved (a turn across midnight counts on the day it
started); its tokens are what ``finish_fire`` recorded, failed turns included.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from hbgw.sessions.heartbeat_view import utc_day
from hbgw.sessions.models import RunRow


def tokens_on_day_in(db: Session, heartbeat_id: int, now: datetime) -> int:
    """Tokens of the heartbeat's runs reserved on the UTC day of ``now``."""
    start = utc_day(now)
    total = db.scalar(
        select(func.sum(RunRow.prompt_tokens + RunRow.completion_tokens)).where(
            RunRow.heartbeat_id == heartbeat_id,
            RunRow.reserved_at >= start,
            RunRow.reserved_at < start + timedelta(days=1),
        )
    )
    return int(total or 0)
