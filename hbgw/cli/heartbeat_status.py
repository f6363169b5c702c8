"""`hbgw heartbeat status`'s work, without Typer: scripts poll it, so the console script's entry
point (``hbgw.cli.fast``) runs it without the command tree, and ``heartbeat_cmd`` gives it its
options and help. Both paths run this function: the same output, errors and exit codes.

It reads SQL straight from the driver when it can (``sessions.status_read``; else the store)
and Redis through the quick client when it can (``state.resp_quick``; else redis-py), so a
call on SQLite with a plain Redis imports neither SQLAlchemy nor redis-py.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime
from typing import TYPE_CHECKING

from hbgw.cli.common import open_store, out, out_json, store_settings
from hbgw.cli.gateway_ctx import state_redis, stop_and_busy
from hbgw.core.clock import utcnow

if TYPE_CHECKING:
    from hbgw.core.settings_quick import StoreSettings
    from hbgw.sessions.heartbeat_view import HeartbeatStatusView


class _NoGauge:
    """A command's clock offset is said on stderr when large, never exported (no metrics)."""

    def set(self, value: float) -> None:
        pass


def print_status(session_id: str, as_json: bool) -> None:
    """Prompt, schedule, next fire time, fires so far and last outcome, from SQL; whether a
    turn or an emergency stop holds the session, from Redis (None when none answers)."""
    from hbgw.sessions import replies

    s = store_settings()
    estop, busy, now = _from_redis(s, session_id)  # None: no Redis answers, so nobody knows
    result = replace(_read(s, session_id, now), busy=busy)
    if as_json:
        out_json({**result.to_json(), "emergency_stop": estop})
    else:
        out(replies.status_reply(result, estop=bool(estop)))


def _from_redis(s: StoreSettings, session_id: str) -> tuple[bool | None, bool | None, datetime]:
    """The stop and the turn, and the time now by the shared clock (``cli.common.now``)."""
    from hbgw.state.keys import Keys
    from hbgw.state.resp_quick import QuickRedisError
    from hbgw.state.shared_clock import shared_clock

    with state_redis(s) as client:
        if client is None:
            return None, None, utcnow()
        try:
            estop, busy = stop_and_busy(client, Keys(s.namespace), session_id)
        except (OSError, QuickRedisError):
            return None, None, utcnow()  # the quick client lost it: as if it never answered
        return estop, busy, shared_clock(client, s, gauge=_NoGauge())()


def _read(s: StoreSettings, session_id: str, now: datetime) -> HeartbeatStatusView:
    from hbgw.sessions.status_read import read_status

    url = s.effective_database_url
    quick = read_status(url, session_id, now)
    if quick is not None:
        return quick
    store = open_store()
    try:
        return store.heartbeats.heartbeat_status(session_id, now)
    finally:
        store.close()
