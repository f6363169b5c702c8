"""Dedupe and backing off through real beat and workers (backdated state, not sleeps): a repeat
is held back and recorded as such until its window has passed; quiet fires stretch the interval
the due index holds, and a user turn snaps it back; and the words through chat, CLI and API."""

from __future__ import annotations

import json
from datetime import datetime, timedelta

from sqlalchemy import update
from support.api_fixtures import ALICE, Api
from support.cli_fixtures import Hbgw
from support.harness import Gateway, wait_until
from support.scenarios import send

from hbgw.core.clock import to_ms, utcnow
from hbgw.sessions.dedupe import DUPLICATE_DETAIL
from hbgw.sessions.grammar import IntervalSchedule
from hbgw.sessions.grammar.policy import Policy
from hbgw.sessions.models import HeartbeatRow
from hbgw.sessions.states import DeliveryState, RunState


def set_due(gw: Gateway, sid: str, prompt: str, **policy: object) -> None:
    """Set (again) as if 61 s ago on a 60 s interval: due now."""
    gw.store.heartbeats.set_heartbeat(
        sid,
        schedule=IntervalSchedule(60),
        schedule_text="every 60s",
        prompt=prompt,
        now=utcnow() - timedelta(seconds=61),
        policy=Policy(exact=True, **policy),  # type: ignore[arg-type]
    )
    gw.rt.due.settle(sid)


def fired(gw: Gateway, sid: str, count: int) -> list[str]:
    """Tick until the session has ``count`` finished runs; the texts sent so far."""
    wait_until(lambda: gw.tick() and len(gw.final_runs(sid, count)) >= count, 30, "the fire")
    return [r["text"] for r in gw.deliveries(sid, "send")]


def heartbeat_row(gw: Gateway, sid: str) -> HeartbeatRow:
    with gw.store.engine.connect() as conn:
        row = conn.execute(HeartbeatRow.__table__.select().where(HeartbeatRow.session_id == sid))
        return row.one()  # type: ignore[return-value]


def backdate_reply(gw: Gateway, sid: str, at: datetime) -> None:
    with gw.store.engine.begin() as conn:
        conn.execute(
            update(HeartbeatRow).where(HeartbeatRow.session_id == sid).values(last_reply_at=at)
        )


def test_a_repeat_is_held_back_until_its_window_has_passed(gateway: Gateway) -> None:
    gw = gateway
    with gw.worker("w1"):
        sid = gw.session()
        set_due(gw, sid, "SAY: all  green", dedupe=3600)
        assert fired(gw, sid, 1) == ["all  green"]
        delivered_at = heartbeat_row(gw, sid).last_reply_at
        set_due(gw, sid, "SAY: all\\n\tgreen ", dedupe=3600)  # only the whitespace differs
        assert fired(gw, sid, 2) == ["all  green"]
        repeat = gw.runs(sid)[-1]
        assert (repeat.state, repeat.detail) == (RunState.SILENT, DUPLICATE_DETAIL)
        assert repeat.delivery is not None
        assert repeat.delivery.state == DeliveryState.SUPPRESSED
        assert heartbeat_row(gw, sid).last_reply_at == delivered_at  # a repeat is no delivery
        # The window has passed since the delivery: the same reply goes out again.
        backdate_reply(gw, sid, utcnow() - timedelta(seconds=3601))
        set_due(gw, sid, "SAY: all green", dedupe=3600)
        assert fired(gw, sid, 3) == ["all  green", "all green"]
        # Another route (the heartbeat set from another thread) is not a repeat either.
        gw.store.heartbeats.set_heartbeat(
            sid,
            schedule=IntervalSchedule(60),
            schedule_text="every 60s",
            prompt="SAY: all green",
            now=utcnow() - timedelta(seconds=61),
            origin_chat="C1",
            origin_thread="T9",
            policy=Policy(exact=True, dedupe=3600),
        )
        gw.rt.due.settle(sid)
        assert fired(gw, sid, 4)[-1] == "all green"


def test_quiet_fires_back_off_and_the_user_snaps_it_back(gateway: Gateway) -> None:
    gw = gateway
    with gw.worker("w1"):
        sid = gw.session()
        set_due(gw, sid, "QUIET", backoff=240)
        assert fired(gw, sid, 1) == []
        row = heartbeat_row(gw, sid)
        assert row.last_fired_at is not None and row.quiet_fires == 1
        assert row.next_due_at == row.last_fired_at + timedelta(seconds=120)
        # What status shows is real: the worker writes the index in the round trip after the
        # finish's COMMIT, so the index may trail the row for a moment.
        due = to_ms(row.next_due_at)
        wait_until(lambda: gw.rt.index.due_ms(sid) == due, 30, "the index to follow the row")
        status = gw.store.heartbeats.heartbeat_status(sid, utcnow()).to_json()
        assert (status["backing_off"], status["interval_now_seconds"]) == (True, 120)
        spoke = utcnow()
        send(gw, sid, "hello")
        wait_until(lambda: not heartbeat_row(gw, sid).quiet_fires, 30, "the snap back")
        row = heartbeat_row(gw, sid)
        assert row.anchor_at >= spoke and row.next_due_at == row.anchor_at + timedelta(seconds=60)
        due = to_ms(row.next_due_at)
        wait_until(lambda: gw.rt.index.due_ms(sid) == due, 30, "the index to follow the snap back")


def test_chat_cli_and_api_set_dedupe_and_backoff(hbgw: Hbgw, api: Api) -> None:
    sid = hbgw("session", "create", "--platform", "slack", "--chat", "C1").out.strip()
    said = hbgw("send", sid, "/heartbeat every 15m dedupe 6h backoff 4h check CI").out.strip()
    assert said == "♥ Heartbeat set (every 15m dedupe 6h backoff 4h): check CI"
    status = json.loads(hbgw("heartbeat", "status", sid, "--json").out)
    assert (status["dedupe_seconds"], status["backoff_seconds"]) == (21600, 14400)
    assert (status["backing_off"], status["interval_now_seconds"]) == (False, 900)
    hbgw("send", sid, "/heartbeat every 15m check CI")
    assert json.loads(hbgw("heartbeat", "status", sid, "--json").out)["dedupe_seconds"] == 86400
    cli = hbgw("heartbeat", "set", sid, "--every", "1h", "--dedupe", "0", "--backoff", "1d", "x")
    assert cli.code == 0, cli.err
    status = json.loads(hbgw("heartbeat", "status", sid, "--json").out)
    assert (status["dedupe_seconds"], status["backoff_seconds"]) == (0, 86400)
    bad = hbgw("heartbeat", "set", sid, "--every", "1h", "--backoff", "30m", "x")
    assert bad.code == 2 and "give more than the interval (1h)" in bad.err
    with api.owner(ALICE) as alice:
        api_sid = api.new_session(alice)
        body = {"schedule": "every 15m", "prompt": "x", "dedupe": "2h", "backoff": "2h"}
        put = alice.put(f"/v1/sessions/{api_sid}/heartbeat", json=body)
        assert put.status_code == 200, put.text
        shown = put.json()["heartbeat"]
        assert (shown["dedupe_seconds"], shown["backoff_seconds"]) == (7200, 7200)
        body = {"schedule": "cron 0 9 * * *", "prompt": "x", "backoff": "2h"}
        bad_api = alice.put(f"/v1/sessions/{api_sid}/heartbeat", json=body)
        assert bad_api.status_code == 422 and "doubles an interval" in bad_api.text
