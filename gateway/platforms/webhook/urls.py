"""Where a webhook session's messages go: the URL on its record, else HBGW_WEBHOOK_URL.

A worker hands in its Runtime's store; without one (a channel built on its own) the first
lookup opens one from the settings' database URL.
"""

from __future__ import annotations

import threading

from hbgw.core.settings import Settings
from hbgw.sessions.store import Store


class StoredUrls:
    def __init__(self, settings: Settings, store: Store | None = None) -> None:
        self.default = settings.webhook_url
        self.database_url = settings.effective_database_url
        self.store = store
        self._lock = threading.Lock()

    def __call__(self, session_id: str) -> str | None:
        return self._store().webhook_url(session_id) or self.default

    def _store(self) -> Store:
        with self._lock:
            if self.store is None:
                self.store = Store.from_url(self.database_url)
            return self.store
