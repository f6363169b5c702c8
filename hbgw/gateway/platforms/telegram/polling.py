"""Long polling, the webhook's alternative for a gateway Telegram cannot reach: ``getUpdates``
with an ``offset`` (each answer confirms every update before it) and a ``timeout`` (Telegram
holds the request until an update comes), every update fed to the same ``TelegramBot.take``
as the webhook's, its command answers posted at once.

Telegram refuses ``getUpdates`` while a webhook is set, and while another process polls the
same bot (409): both end the loop with a sentence that says what to do. An update whose
handling failed is not confirmed: the next ``getUpdates`` brings it again (its ``update_id``
was forgotten, so it is taken then).
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field

from hbgw.core.errors import BadInput
from hbgw.gateway.api.context import ApiContext
from hbgw.gateway.platforms.telegram.api import Refused, Unreachable
from hbgw.gateway.platforms.telegram.inbound import TelegramBot
from hbgw.gateway.platforms.telegram.updates import update_id

log = logging.getLogger("hbgw.telegram")

ALLOWED_UPDATES = ["message"]
RETRY_PAUSE = 5.0  # seconds between getUpdates attempts while Telegram or the store fails


def conflict_sentence(refused: Refused) -> str:
    if "webhook" in refused.description.lower():
        return (
            "Telegram will not hand out updates by polling while a webhook is set for this bot "
            "(it answered 409: deleteWebhook is needed first): run `hbgw telegram "
            "delete-webhook`, then `hbgw telegram poll` again."
        )
    return (
        "Another process is polling this bot already (Telegram answered 409: one getUpdates "
        "at a time); stop it, then start `hbgw telegram poll` again."
    )


@dataclass
class Poller:
    ctx: ApiContext
    bot: TelegramBot
    wait: int = 25  # seconds Telegram may hold a getUpdates open
    stop: threading.Event = field(default_factory=threading.Event)
    offset: int | None = None
    taken: int = 0

    def run(self) -> None:
        """Poll until ``stop`` is set; a 409 or a refused token raises ``BadInput``."""
        while not self.stop.is_set():
            if not self.once():
                self.stop.wait(RETRY_PAUSE)

    def once(self) -> bool:
        """One getUpdates and its updates; False when it should be tried again later."""
        try:
            updates = self.bot.channel.api.call(
                "getUpdates",
                {"offset": self.offset, "timeout": self.wait, "allowed_updates": ALLOWED_UPDATES},
                wait=self.wait,
            )
        except Refused as refused:
            self.refused(refused)
            return False
        except Unreachable as exc:
            log.warning(
                "getUpdates got no answer; trying again: %s",
                exc,
                extra={"action": "telegram.poll_unreachable"},
            )
            return False
        # In order, and no further than the first that failed: it is not confirmed.
        return all(self.take(update) for update in (updates if isinstance(updates, list) else ()))

    def take(self, update: object) -> bool:
        uid = update_id(update)
        if uid is None or not isinstance(update, dict):
            return True  # not an update: nothing to take, nothing to confirm
        try:
            answer = self.bot.take(self.ctx, update)
        except Exception as exc:  # the store or Redis failing: the update comes again
            log.warning(
                "update %d not taken; it comes again with the next getUpdates: %s: %s",
                uid,
                type(exc).__name__,
                exc,
                extra={"action": "telegram.poll_take_failed"},
            )
            return False
        self.offset = uid + 1
        self.taken += 1
        if answer is not None:
            self.bot.post(answer)
        return True

    def refused(self, refused: Refused) -> None:
        if refused.status == 409:
            raise BadInput(conflict_sentence(refused))
        if refused.status in (401, 404):
            raise BadInput(
                f"Telegram refused the bot token ({refused.description}): check "
                "HBGW_TELEGRAM_BOT_TOKEN (BotFather's /token shows it)."
            )
        log.warning(
            "getUpdates refused; trying again: %s",
            refused,
            extra={"action": "telegram.poll_refused"},
        )
