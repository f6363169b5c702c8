"""The structured fields every log record of a turn carries (a formatter prints them)."""

from __future__ import annotations

import logging

log = logging.getLogger("hbgw.runner")


def fields(action: str, session: str, fire_id: str | None = None) -> dict[str, str]:
    extra = {"action": action, "session": session}
    if fire_id is not None:
        extra["fire_id"] = fire_id
    return extra
