"""What `hbgw send` prints once the edge has taken the message: the reply, or why there is none.

An emergency stop holds queued messages (they run once it is lifted): `send` says so at once,
with the command that lifts it, and exits ``HELD_EXIT`` instead of waiting for a reply that
cannot come. A reply that is late exits ``LATE_EXIT`` (queued, it will be answered) and a failed
turn's notice ``FAILED_TURN_EXIT``: a script tells the three apart from a send that failed (1)
or was refused (2).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import typer

from hbgw.cli.common import out
from hbgw.cli.gateway_ctx import estop_lift, held_sentence, wait_for_reply
from hbgw.workers.injection import FAILED_TURN_NOTICE
from hbgw.workers.turn_io import REPEAT_MARK

if TYPE_CHECKING:
    from hbgw.gateway.inbound import Queued
    from hbgw.sessions.store.message_records import MessageRecords
    from hbgw.sessions.views import MessageView
    from hbgw.state.redis_part import RedisPart

HELD_EXIT = 3
"""`hbgw send` waited for a reply, but an emergency stop holds the (queued) message."""
LATE_EXIT = 4
"""`hbgw send` waited ``--timeout`` seconds without a reply; the message stays queued and will
be answered (not a failure of the send: nothing is to be sent again)."""
FAILED_TURN_EXIT = 5
"""The reply is the notice of a turn that failed (``⚠ The turn failed: …``)."""


def print_reply(reply: MessageView) -> None:
    """The reply on stdout; a failed turn's notice exits ``FAILED_TURN_EXIT``."""
    out(reply.text)
    # A repeat's text carries its mark first: it is the same failed turn's notice.
    if reply.kind == "notice" and reply.text.removeprefix(REPEAT_MARK).startswith(
        FAILED_TURN_NOTICE
    ):
        raise typer.Exit(FAILED_TURN_EXIT)


def reply_or_hold(
    messages: MessageRecords, redis: RedisPart, queued: Queued, timeout: float | None
) -> None:
    """Print the reply; ``timeout`` None returns at once (``--no-wait``)."""
    mid, sid = queued.message_id, queued.session_id

    def held() -> bool:
        return estop_lift(redis, sid) is not None

    if timeout is not None and not held():
        reply = wait_for_reply(messages, mid, timeout, held=held)
        if reply is not None:
            print_reply(reply)
            return
    lift = estop_lift(redis, sid)
    if lift is None and timeout is None:
        out(f"Message {mid} queued for session {sid}.")
        return
    if lift is None:
        out(late_sentence(mid, sid, timeout or 0.0))
        raise typer.Exit(LATE_EXIT)
    out(held_sentence(mid, sid, lift))
    if timeout is not None:
        raise typer.Exit(HELD_EXIT)


def late_sentence(message_id: int, session_id: str, timeout: float) -> str:
    return (
        f"Message {message_id} is queued; the reply did not come within {timeout:g} s; it will "
        f"be answered — see `hbgw chat {session_id}` or its history (is a worker running: "
        "`hbgw up` or `hbgw worker`?)."
    )


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
