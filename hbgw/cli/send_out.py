"""What `hbgw send` prints once the edge has taken the message: the reply, or why there is none.

An emergency stop holds queued messages (they run once it is lifted): `send` says so at once,
with the command that lifts it, and exits ``HELD_EXIT`` instead of waiting for a reply that
cannot come.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import typer

from core.errors import HbgwError
from hbgw.cli.common import out
from hbgw.cli.gateway_ctx import estop_lift, held_sentence, wait_for_reply

if TYPE_CHECKING:
    from gateway.inbound import Queued
    from sessions.store import Store
    from state.runtime import Runtime

HELD_EXIT = 3
"""`hbgw send` waited for a reply, but an emergency stop holds the (queued) message."""


def reply_or_hold(store: Store, rt: Runtime, queued: Queued, timeout: float | None) -> str:
    """The reply text; ``timeout`` None returns at once (``--no-wait``)."""
    mid, sid = queued.message_id, queued.session_id

    def held() -> bool:
        return estop_lift(rt, sid) is not None

    if timeout is not None and not held():
        reply = wait_for_reply(store, mid, timeout, held=held)
        if reply is not None:
            return reply.text
    lift = estop_lift(rt, sid)
    if lift is None and timeout is None:
        return f"Message {mid} queued for session {sid}."
    if lift is None:
        raise HbgwError(
            f"No reply within {timeout:g}s; message {mid} stays queued — "
            "is a worker running (`hbgw up` or `hbgw worker`)?"
        )
    if timeout is None:
        return held_sentence(mid, sid, lift)
    out(held_sentence(mid, sid, lift))
    raise typer.Exit(HELD_EXIT)


def queued_sentence(result: Queued, *, redis_reachable: bool) -> str:
    """Where a stored message stands, truthfully: it is answered whatever Redis did."""
    head = f"Message {result.message_id} queued for session {result.session_id}"
    if result.duplicate:
        return f"{head} (a retry: this idempotency key was accepted before)."
    if result.handed_off:
        return f"{head}."
    if not redis_reachable:
        return (
            f"{head} (stored; no Redis reachable: it is answered once a gateway and Redis are up)."
        )
    return (
        f"{head} (stored; Redis did not take it: it is answered once Redis works again and "
        "beat's restore pass runs)."
    )
