"""A webhook session's URL: where its replies and heartbeats are POSTed (set through the API;
sessions without one use HBGW_WEBHOOK_URL). Compression and a switch carry it to the session
that continues the conversation (``session_records.py``)."""

from __future__ import annotations

from datetime import datetime

from hbgw.core.errors import BadInput
from hbgw.core.webhook_url import webhook_url_problem
from hbgw.sessions.models import SessionRow
from hbgw.sessions.store.base import Transactions, session_row, transaction


class WebhookRoutes(Transactions):
    @transaction
    def webhook_url(self, session_id: str) -> str | None:
        """The URL on the session's record; None when it has none (or is gone)."""
        with self._transaction() as db:
            row = db.get(SessionRow, session_id)
            return row.webhook_url if row is not None else None

    @transaction(repeatable=True)  # setting the same URL twice leaves the same row
    def set_webhook_url(self, session_id: str, url: str | None, now: datetime) -> str | None:
        """Keep ``url`` (None: forget it) on the session; ``BadInput`` when it is not postable."""
        if url is not None:
            problem = webhook_url_problem(url)
            if problem is not None:
                raise BadInput(problem)
        with self._transaction() as db:
            row = session_row(db, session_id, for_update=True)
            row.webhook_url = url
            row.updated_at = now
            return url
