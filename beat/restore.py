"""The restore pass: SQL is the truth; the due index and the session inboxes are rebuilt from it.

Runs when beat starts and every HBGW_RESTORE_INTERVAL seconds. It only adds or corrects
entries, never removes one: a failing store read is logged and retried on the next pass.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from core.clock import to_ms
from sessions.store import Store
from state.due_index import DueIndex
from state.failures import log_failure
from state.turn_gate import TurnGate

log = logging.getLogger("hbgw.restore")


@dataclass(frozen=True)
class RestoreReport:
    ok: bool
    restorable: int = 0
    written: int = 0
    requeued: int = 0


def restore(
    store: Store, index: DueIndex, gate: TurnGate, *, now_ms: int, slack_ms: int
) -> RestoreReport:
    """Put every restorable heartbeat into the index at its true next due time.

    An entry already present is kept unless it would fire later than the truth (or now, for an
    overdue heartbeat) by more than ``slack_ms``: a claim lease or a refund back-off
    legitimately pushes an entry later.
    """
    try:
        entries = store.list_restorable()
    except Exception as exc:
        log_failure(
            log, "restore: store read failed; retrying next pass", exc, action="restore.failed"
        )
        return RestoreReport(ok=False)
    present = index.due_many([e.session_id for e in entries])
    wanted: dict[str, int] = {}
    for entry in entries:
        due = to_ms(entry.next_due_at)
        current = present.get(entry.session_id)
        if current is None or current > max(due, now_ms) + slack_ms:
            wanted[entry.session_id] = due
    if wanted:
        index.schedule_many(wanted)
    gate.seed_many({e.session_id: e.fence for e in entries})
    requeued = restore_inboxes(store, gate)
    log.info(
        "restore: %d restorable, %d written, %d messages requeued",
        len(entries),
        len(wanted),
        requeued,
        extra={"action": "restore.done"},
    )
    return RestoreReport(ok=True, restorable=len(entries), written=len(wanted), requeued=requeued)


def restore_inboxes(store: Store, gate: TurnGate) -> int:
    """Every queued message SQL holds that Redis lost goes back to its session's inbox.

    Redis may have been flushed, restarted without persistence, or unreachable when the
    message was accepted; SQL still has it ``queued``. Returns how many were put back.
    """
    try:
        queued = store.queued_messages()
    except Exception:
        log.exception(
            "restore: reading queued messages failed; retrying next pass",
            extra={"action": "restore.inbox_failed"},
        )
        return 0
    added = gate.restore_inboxes(queued)
    for session_id, count in added.items():
        log.info(
            "restore: %d queued messages put back into the inbox",
            count,
            extra={"action": "restore.requeued", "session": session_id},
        )
    return sum(added.values())
