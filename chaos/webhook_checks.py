"""The webhook checks (issue 17), run with the others from chaos/checks.py's ``ALL_CHECKS``:
every reply and heartbeat POSTed to the run's receiver arrived once per delivery key — a request
again with the same key is the receiver's to drop, and is counted, not failed — and a message
that arrived under two keys is failed unless the later copy says ``possible repeat``; no request
was unsigned, and no delivery record says ``sent`` for a key the receiver never took.

``webhook_sends`` turns what the receiver took (one request per key) into channel records, so
the run's other checks (answered once, no stale send, no send after the lock moved) judge the
webhook sessions like the file channel's. The receiver gets public message ids (``reply_to``,
``msg:<id>`` keys); ``in_sql_ids`` turns them back into SQL's, which the delivery records, the
channel file and the messages hold.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import replace

from chaos.evidence import Delivery, Evidence, WebhookHit
from chaos.verdict import Check
from hbgw.core.errors import BadInput
from hbgw.gateway.public_ids import PublicIds
from hbgw.workers.user_turn import reply_key, reply_key_message

# States a record may only have if its message reached the receiver.
CLAIMS_ARRIVAL = {"sent", "suppressed"}


def in_sql_ids(hit: WebhookHit, ids: PublicIds) -> WebhookHit:
    """The request with SQL's message ids in its keys and ``reply_to`` (a number the gateway
    cannot have given stays as it came, for the checks to judge)."""

    def key(value: str | None) -> str | None:
        found = reply_key_message(value) if value is not None else None
        if found is None:
            return value
        sql = _sql_id(found[0], ids)
        return value if sql is None else f"{reply_key(sql)}{found[1]}"

    reply_to = hit.reply_to
    if reply_to is not None and reply_to.isascii() and reply_to.isdigit():
        sql = _sql_id(int(reply_to), ids)
        reply_to = reply_to if sql is None else str(sql)
    return replace(hit, key=key(hit.key), delivery_key=key(hit.delivery_key), reply_to=reply_to)


def _sql_id(public: int, ids: PublicIds) -> int | None:
    try:
        return ids.read(public)
    except BadInput:
        return None


def webhook_sends(hits: list[WebhookHit]) -> list[Delivery]:
    return [
        Delivery(
            call="send",
            session=h.session or "",
            at=h.at,
            kind=h.kind,
            reply_to=h.reply_to,
            ref=h.ref,
            delivery_key=h.key,
            repeat=h.repeat,
        )
        for h in hits
        if h.taken
    ]


def _identity(h: WebhookHit) -> tuple[str | None, ...]:
    """One message of a turn, whatever key it was sent under (a notice may be one of many)."""
    return (h.session, h.kind, h.ref, h.reply_to)


def webhook_delivered_once(ev: Evidence) -> Check:
    check = Check("webhook_delivered_once")
    by_key: dict[str | None, list[WebhookHit]] = defaultdict(list)
    for h in ev.webhook:
        by_key[h.key].append(h)
        if not h.signed:
            check.failures.append(f"a request for {h.key} at {h.at:.2f} was not signed")
        elif h.key is None or h.key != h.delivery_key:
            check.failures.append(
                f"a request at {h.at:.2f} carried Idempotency-Key {h.key}, its body "
                f"{h.delivery_key}"
            )
    taken = [h for h in ev.webhook if h.taken]
    for key, n in Counter(h.key for h in taken).items():
        if n > 1:
            check.failures.append(f"{key} was taken {n} times")
    marked = _different_keys(taken, check)
    never = [k for k, hs in by_key.items() if k is not None and not any(h.taken for h in hs)]
    for key in never:
        if any(h.at >= ev.snapshot - ev.grace for h in by_key[key]):
            # Refused inside the grace before the snapshot: its retry may be in flight, and
            # the records are read after the receiver's, so a retry taken in between reads
            # "sent" with no arrival (the same grace as no_unfinished_runs).
            continue
        state = ev.webhook_records.get(key)
        if state in CLAIMS_ARRIVAL:
            check.failures.append(f"{key} is recorded {state}, but the receiver never took it")
    statuses = Counter(h.status for h in ev.webhook)
    check.figures.update(
        requests=len(ev.webhook),
        delivered=len(taken),
        same_key_repeats=len(ev.webhook) - len(by_key),
        dropped_by_receiver=sum(1 for h in ev.webhook if h.status == 200 and not h.taken),
        failed_500=statuses[500],
        hung=sum(1 for h in ev.webhook if h.hung),
        marked_possible_repeat=sum(1 for h in ev.webhook if h.repeat),
        taken_again_marked=marked,
        never_taken=len(never),
        records=dict(Counter(ev.webhook_records.values())),
    )
    return check


def _different_keys(taken: list[WebhookHit], check: Check) -> int:
    """Messages taken under more than one key: every copy after the first must be marked."""
    by_message: dict[tuple[str | None, ...], list[WebhookHit]] = defaultdict(list)
    for h in taken:
        if h.kind != "notice":
            by_message[_identity(h)].append(h)
    marked = 0
    for identity, copies in by_message.items():
        for h in sorted(copies, key=lambda h: h.at)[1:]:
            if h.repeat:
                marked += 1
            else:
                check.failures.append(
                    f"{h.kind} of {identity[0]} taken again under key {h.key}, not marked repeat"
                )
    return marked
