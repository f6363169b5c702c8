"""What every CLI command shares: settings, the store, the clock, output."""

from __future__ import annotations

import json
import sys
from datetime import datetime
from typing import Any

from core.clock import utcnow
from core.settings import Settings, get_settings
from sessions.grammar import GrammarLimits, limits_from_settings
from sessions.store import Store


def settings() -> Settings:
    return get_settings()


def open_store() -> Store:
    return Store.from_url(settings().effective_database_url)


def limits() -> GrammarLimits:
    return limits_from_settings(settings())


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
