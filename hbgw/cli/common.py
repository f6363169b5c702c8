"""What every CLI command shares: settings, the store, the clock, output."""

from __future__ import annotations

import json
import sys
from datetime import datetime
from typing import Any

from core.clock import utcnow
from core.settings import Settings, get_settings
from sessions.commands import GrammarLimits
from sessions.intervals import parse_interval
from sessions.store import Store


def settings() -> Settings:
    return get_settings()


def open_store() -> Store:
    return Store.from_url(settings().effective_database_url)


def limits() -> GrammarLimits:
    s = settings()
    return GrammarLimits(
        min_interval=s.min_interval,
        default_interval=parse_interval(s.default_interval, minimum=s.min_interval),
        max_prompt_chars=s.max_prompt_chars,
    )


def now() -> datetime:
    return utcnow()


def out(text: str) -> None:
    # Flushed line by line: `hbgw up > up.log` or a supervisor's pipe must see "Ready." when it
    # is written, not when a block buffer fills.
    sys.stdout.write(text + "\n")
    sys.stdout.flush()


def err(text: str) -> None:
    sys.stderr.write(text + "\n")
    sys.stderr.flush()


def out_json(data: Any) -> None:
    out(json.dumps(data, indent=2, sort_keys=True))
