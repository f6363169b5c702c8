"""Print what a platform would receive, with escape codes shown rather than obeyed, one line a
delivery: the worker's stdout is also its log, where a reply's own ``\nts=… level=ERROR`` line
would read as a record of the gateway's."""

from __future__ import annotations

import sys

from hbgw.core.terminal import one_line
from hbgw.workers.ports import Address, Receipt, SendGuard


class ConsoleChannel:
    name = "console"

    def send(
        self,
        address: Address,
        text: str,
        *,
        session_id: str,
        kind: str,
        delivery_key: str,
        possible_repeat: bool = False,
        ref: str | None = None,
        guard: SendGuard | None = None,
    ) -> Receipt | None:
        where = address.chat + (f"/{address.thread}" if address.thread else "")
        # A possible repeat says so before anything else on the line (its text is marked too).
        label = f"{kind}, possible repeat of {delivery_key}" if possible_repeat else kind
        sys.stdout.write(one_line(f"[{address.platform}:{where}] ({label}) {text}") + "\n")
        sys.stdout.flush()
        return None

    def typing(self, address: Address, *, session_id: str) -> None:
        return None

    def progress(self, address: Address, text: str, *, session_id: str) -> None:
        return None
