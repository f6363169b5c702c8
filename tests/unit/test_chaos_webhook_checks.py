"""The chaos run's webhook check, fed constructed receiver records: a key taken once passes
however often it was sent, a message taken again under another key fails unless marked
repeat, an unsigned request fails, and a record that says ``sent`` for a key the receiver never
took fails. What the receiver took becomes channel records for the run's other checks."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from chaos import recheck
from chaos.evidence import Evidence, WebhookHit
from chaos.webhook_checks import in_sql_ids, webhook_delivered_once, webhook_sends
from hbgw.gateway.public_ids import PublicIds, id_key

T = 1_000_000.0


def hit(key: str, at: float, status: int = 200, taken: bool = True, **kw: str) -> WebhookHit:
    """A heartbeat's request (its key is its fire id) unless ``kw`` says otherwise."""
    made = WebhookHit(
        at=T + at, key=key, repeat=False, signed=True, status=status, taken=taken, hung=False,
        session="s1", kind="heartbeat", ref=key, delivery_key=key,
    )  # fmt: skip
    return replace(made, **kw)  # type: ignore[arg-type]


def test_one_key_taken_once_passes_however_often_it_was_sent() -> None:
    hits = [
        hit("s1:1", 0, 500, taken=False),
        hit("s1:1", 1, 200, taken=True),
        hit("s1:1", 2, 200, taken=False),  # after a hang: the receiver dropped it
        hit("s1:2", 3),
    ]
    check = webhook_delivered_once(Evidence(webhook=hits, webhook_records={"s1:1": "sent"}))
    assert check.ok, check.failures
    assert check.figures["same_key_repeats"] == 2
    assert check.figures["dropped_by_receiver"] == 1 and check.figures["failed_500"] == 1
    assert [d.delivery_key for d in webhook_sends(hits)] == ["s1:1", "s1:2"]


def test_a_message_taken_under_another_key_fails_unless_marked() -> None:
    first = replace(hit("msg:7", 0, kind="reply", reply_to="7"), ref=None)
    unmarked = replace(first, key="msg:7b", delivery_key="msg:7b", at=T + 1)
    assert not webhook_delivered_once(Evidence(webhook=[first, unmarked])).ok
    marked = replace(unmarked, repeat=True)
    check = webhook_delivered_once(Evidence(webhook=[first, marked]))
    assert check.ok and check.figures["taken_again_marked"] == 1


def test_unsigned_mismatched_and_untrue_records_fail() -> None:
    unsigned = replace(hit("s1:1", 0, 401, taken=False), signed=False)
    assert not webhook_delivered_once(Evidence(webhook=[unsigned])).ok
    mismatched = replace(hit("s1:2", 0), delivery_key="s1:3")
    assert not webhook_delivered_once(Evidence(webhook=[mismatched])).ok
    never = hit("s1:4", 0, 500, taken=False)
    lying = Evidence(webhook=[never], webhook_records={"s1:4": "sent"}, snapshot=T + 60)
    failed = webhook_delivered_once(lying)
    assert failed.failures == ["s1:4 is recorded sent, but the receiver never took it"]
    honest = Evidence(webhook=[never], webhook_records={"s1:4": "failed"}, snapshot=T + 60)
    assert webhook_delivered_once(honest).ok


def test_a_key_refused_inside_the_grace_may_still_be_retried() -> None:
    """The receiver is read before SQL: a retry taken in between reads "sent" with no arrival
    (chaos quick, refused 0.2 s before the snapshot)."""
    late = hit("s1:5", 59.8, 500, taken=False)
    ev = Evidence(webhook=[late], webhook_records={"s1:5": "sent"}, snapshot=T + 60, grace=10)
    assert webhook_delivered_once(ev).ok
    early = replace(ev, webhook=[replace(late, at=T + 40)])
    assert not webhook_delivered_once(early).ok


def test_receiver_records_are_saved_for_a_recheck(tmp_path: Path) -> None:
    ev = Evidence(webhook=[hit("s1:1", 0)], webhook_records={"s1:1": "sent"})
    recheck.save(ev, tmp_path / "evidence.json")
    assert recheck.load(tmp_path / "evidence.json") == ev


def test_public_ids_the_receiver_got_are_read_back_as_sql_ids() -> None:
    """Issue 29 (low): the webhooks now carry public message ids; the checks compare them with
    SQL's delivery records and messages, so the run reads them back first."""
    ids = PublicIds(lambda: id_key("chaos-test-key"))
    public = ids.show(7)
    got = hit(f"msg:{public}:notice:1", 0, kind="notice", reply_to=str(public))
    back = in_sql_ids(got, ids)
    assert (back.key, back.delivery_key, back.reply_to) == ("msg:7:notice:1",) * 2 + ("7",)
    heartbeat = hit("s1:1000", 0)  # a fire id: no message id in it
    assert in_sql_ids(heartbeat, ids) == heartbeat
    forged = hit("msg:0x1", 0, reply_to=str(1 << 70))  # nothing the gateway gives: kept
    assert in_sql_ids(forged, ids) == forged
