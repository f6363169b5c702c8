"""What every CLI command shares: settings, the store, the clock, output.

Every `hbgw` call imports this module, `--help` included, so it imports nothing heavy: pydantic,
SQLAlchemy and the grammar load inside the function that needs them.
"""

from __future__ import annotations

import json
import sys
from datetime import datetime
from typing import TYPE_CHECKING, Any

from hbgw.core.clock import utcnow
from hbgw.core.errors import BadInput, HbgwError
from hbgw.core.terminal import inert

if TYPE_CHECKING:
    from hbgw.core.settings import Settings
    from hbgw.sessions.grammar import GrammarLimits
    from hbgw.sessions.store import Store
    from hbgw.sessions.views import DeliveryView


def settings() -> Settings:
    from pydantic import ValidationError

    from hbgw.core.settings import get_settings

    try:
        return get_settings()
    except ValidationError as exc:
        # pydantic's report spans several lines; the CLI promises one sentence and exit code 2.
        problem = exc.errors()[0]
        where = problem["loc"][0] if problem["loc"] else None
        name = f"HBGW_{str(where).upper()}" if where is not None else "An HBGW_ variable"
        # A validator's own sentence comes as "Value error, <sentence>".
        msg = problem["msg"].removeprefix("Value error, ").rstrip(".")
        raise BadInput(f"{name} is not valid: {msg} — fix it in the environment.") from exc


def open_store() -> Store:
    from hbgw.sessions.store import Store

    return Store.from_url(settings().effective_database_url)


def limits() -> GrammarLimits:
    from hbgw.sessions.grammar import limits_from_settings

    return limits_from_settings(settings())


def now() -> datetime:
    """The shared clock, Redis ``TIME``, when the deployment's Redis answers; else this host's.

    What a command writes (an anchor, a session's times) is compared by beat and the workers,
    which date everything by Redis; a host whose clock is off says so on stderr.
    """
    from hbgw.cli.gateway_ctx import reachable_redis
    from hbgw.state.shared_clock import shared_clock

    s = settings()
    client = reachable_redis(s)
    if client is None:
        return utcnow()
    try:
        return shared_clock(client, s)()
    finally:
        client.close()


def path_hint() -> str | None:
    """A sentence when `hbgw` is not on this shell's PATH, saying how to put it there: every
    hint `hbgw` prints (`Try: hbgw session create …`, `hbgw chat SID`) is written that way."""
    import shutil
    from pathlib import Path

    if shutil.which("hbgw"):
        return None
    activate = Path(sys.executable).parent / "activate"
    how = f"`. {activate}`" if activate.is_file() else "`pipx install -e .` in the checkout"
    return f"Note: `hbgw` is not on this shell's PATH; {how} puts it there, for the commands below."


def out(text: str) -> None:
    # Flushed line by line: `hbgw up > up.log` or a supervisor's pipe must see "Ready." when it
    # is written, not when a block buffer fills. Prompts, replies and chat names may carry escape
    # codes: they are shown, never obeyed (the store keeps them as they came).
    sys.stdout.write(inert(text) + "\n")
    sys.stdout.flush()


def err(text: str) -> None:
    sys.stderr.write(inert(text) + "\n")
    sys.stderr.flush()


def out_json(data: Any) -> None:
    out(json.dumps(data, indent=2, sort_keys=True))


def delivery_cell(delivery: DeliveryView | None) -> str:
    """How a run's delivery ended, in a word — delivered, suppressed, failed, unknown,
    retrying, pending (``-``: nothing recorded, as for runs that never reached their send, or
    that ended before delivery records were kept); ``delivered×2`` when it took more than one
    attempt."""
    if delivery is None:
        return "-"
    again = f"×{delivery.attempts}" if delivery.attempts > 1 else ""
    return f"{delivery.outcome}{again}"


def delivery_error(delivery: DeliveryView | None) -> str:
    """Why a delivery is not plainly sent, when the run's detail does not say it already; when
    the next attempt of a retrying one is due."""
    if delivery is None:
        return ""
    due = delivery.next_attempt_at
    when = f" (next attempt {due.isoformat(timespec='seconds')})" if due is not None else ""
    return f"{delivery.error or ''}{when}"


def aligned(
    table: list[list[str]], tails: list[str], numeric: frozenset[int] = frozenset()
) -> None:
    """Print ``table`` with each column as wide as its widest cell (ids and times differ in
    length by kind), numbers right-aligned, each row's free-text tail last and unpadded."""
    widths = [max(len(row[i]) for row in table) for i in range(len(table[0]))]
    for row, tail in zip(table, tails, strict=True):
        pairs = enumerate(zip(row, widths, strict=True))
        line = [c.rjust(w) if i in numeric else c.ljust(w) for i, (c, w) in pairs]
        out("  ".join([*line, tail]).rstrip())


def sentence(exc: HbgwError) -> str:
    """The error's message on one line; a bare error falls back to its class's description."""
    text = " ".join(str(exc).split())
    if not text:
        text = " ".join((type(exc).__doc__ or "").strip().split("\n\n")[0].split())
    return text or f"{type(exc).__name__} (no details were given)."
