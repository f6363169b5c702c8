"""Two API replicas behind the same Redis and SQL (issue 17): Slack's retry of an event may
reach the other replica, and both replicas' heartbeats are run by the same workers. Each event
is stored once, each heartbeat fire is delivered once, into its thread."""

from __future__ import annotations

import dataclasses
from collections import Counter

from support.harness import wait_until
from support.http_server import serving
from support.slack_fixtures import BOT, CHANNEL, TEAM, Slack, api_clock, message

from hbgw.core.clock import utcnow
from hbgw.gateway.api.app import create_app

ROOT = "1700000000.000900"


def test_two_api_replicas_store_each_event_once_and_deliver_each_heartbeat_once(
    slack: Slack,
) -> None:
    gw = slack.gw
    other = create_app(gw.settings, celery_app=gw.app, redis_url=gw.redis_url, clock=api_clock)
    with serving(other) as url2, gw.worker("w1"):
        replica = dataclasses.replace(slack, url=url2)
        said = message(f"<@{BOT}> heartbeat every 1m check the thread", "1700000000.000901",
                       thread_ts=ROOT)  # fmt: skip
        assert slack.event("EvR1", said).status_code == 200
        # Slack's retry of the same event, answered by the other replica.
        retry = replica.event("EvR1", said, headers={"X-Slack-Retry-Num": "1"})
        assert retry.status_code == 200
        wait_until(lambda: slack.fake.posts(thread_ts=ROOT), 30, "the command's answer")
        session = gw.store.sessions.session_at(
            platform="slack", chat=CHANNEL, thread=ROOT, now=utcnow(),
            owner=f"slack:{TEAM}", create=False,
        )  # fmt: skip
        assert session is not None
        # A user message through one replica, then a heartbeat fire for both to see.
        asked = message("status?", "1700000000.000902", thread_ts=ROOT)
        assert replica.event("EvR2", asked).status_code == 200
        assert slack.event("EvR2", asked, headers={"X-Slack-Retry-Num": "1"}).status_code == 200
        wait_until(lambda: slack.fake.posts(text="user reply to: status?"), 30, "the reply")
        gw.tick()
        gw.tick()  # a second beat pass finds nothing more to fire
        [run] = gw.final_runs(session.id)
    texts = Counter(str(c.params["text"]) for c in slack.fake.posts(thread_ts=ROOT))
    answers = [t for t in texts if t.startswith("♥ Heartbeat set")]
    assert len(answers) == 1 and texts[answers[0]] == 1, texts
    assert texts["user reply to: status?"] == 1, texts
    beats = [t for t in texts if t.startswith("heartbeat reply to")]
    assert len(beats) == 1 and texts[beats[0]] == 1, texts
    messages = gw.store.messages.list_messages(session.id, limit=50)
    assert [m.text for m in messages if m.role == "user"].count("status?") == 1
    assert run.state == "completed"
