"""Where a webhook session's messages go: the URL on its record, else HBGW_WEBHOOK_URL.

A worker hands in its Runtime's store's ``webhooks`` part; without one (a channel built on its
own) the first lookup opens a store from the settings' database URL.
"""

from __future__ import annotations

import threading

from hbgw.core.settings import Settings
from hbgw.sessions.store import Store, WebhookRoutes


class StoredUrls:
    def __init__(self, settings: Settings, webhooks: WebhookRoutes | None = None) -> None:
        self.default = settings.webhook_url
        self.database_url = settings.effective_database_url
        self.webhooks = webhooks
        self._lock = threading.Lock()

    def __call__(self, session_id: str) -> str | None:
        return self._webhooks().webhook_url(session_id) or self.default

    def _webhooks(self) -> WebhookRoutes:
        with self._lock:
            if self.webhooks is None:
                self.webhooks = Store.from_url(self.database_url).webhooks
            return self.webhooks
