"""Record every channel call as one JSON line: what a platform would have received."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

from hbgw.core.clock import Clock, utcnow
from hbgw.core.jsonl import append_line
from hbgw.core.private import private_dir
from hbgw.workers.ports import Address, Receipt, SendGuard


class FileChannel:
    name = "file"

    def __init__(self, path: Path, *, clock: Clock = utcnow) -> None:
        self.path = path
        self.clock = clock
        private_dir(path.parent)

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
        # The receipt's id, as a platform's would be: unique per message posted.
        message_id = uuid.uuid4().hex
        self._record(
            "send",
            address,
            session_id,
            text=text,
            kind=kind,
            ref=ref,
            delivery_key=delivery_key,
            repeat=possible_repeat,
            message_id=message_id,
        )
        return Receipt(message_id)

    def typing(self, address: Address, *, session_id: str) -> None:
        self._record("typing", address, session_id)

    def progress(self, address: Address, text: str, *, session_id: str) -> None:
        self._record("progress", address, session_id, text=text)

    def _record(self, call: str, address: Address, session_id: str, **extra: Any) -> None:
        append_line(
            self.path,
            {
                "call": call,
                "at": self.clock().timestamp(),
                "session_id": session_id,
                "platform": address.platform,
                "chat": address.chat,
                "thread": address.thread,
                "reply_to": address.reply_to,
                **extra,
            },
        )


def read_records(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
