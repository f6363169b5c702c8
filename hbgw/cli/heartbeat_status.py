"""`hbgw heartbeat status`'s work, without Typer: scripts poll it, so the console script's entry
point (``hbgw.cli.fast``) runs it without the command tree, and ``heartbeat_cmd`` gives it its
options and help. Both paths run this function: the same output, errors and exit codes.
"""

from __future__ import annotations

from dataclasses import replace

from hbgw.cli.common import now, open_store, out, out_json
from hbgw.cli.gateway_ctx import stop_and_busy


def print_status(session_id: str, as_json: bool) -> None:
    """Prompt, schedule, next fire time, fires so far and last outcome, from SQL; whether a
    turn or an emergency stop holds the session, from Redis (None when none answers)."""
    from hbgw.sessions import replies

    estop, busy = stop_and_busy(session_id)  # None: no Redis answers, so nobody knows
    store = open_store()
    try:
        result = replace(store.heartbeats.heartbeat_status(session_id, now()), busy=busy)
    finally:
        store.close()
    if as_json:
        out_json({**result.to_json(), "emergency_stop": estop})
    else:
        out(replies.status_reply(result, estop=bool(estop)))
