"""Delivery that tells the truth (issue 17, item 6), end to end: real Celery workers, Redis and
SQL, the fake Slack Web API reached by slack_sdk, the fake OpenAI endpoint as the model. A
transient failure retries the delivery (the same text under the same key), never the turn: the
model is called once. A send that got no answer is retried as a possible repeat; a 5xx answer
is not. Retries spent: ``failed`` with the reason, in ``hbgw runs`` and the API."""

from __future__ import annotations

from pathlib import Path

from support.cli_fixtures import Hbgw
from support.delivery_fixtures import fire_once, retried, retrying_deployment
from support.fake_openai import Text
from support.fake_slack import Failure
from support.harness import wait_until

from hbgw.core.metrics import gateway_metrics
from hbgw.sessions.states import DeliveryState, RunState
from hbgw.workers.turn_io import REPEAT_MARK

ADMIN = {"Authorization": "Bearer tok-admin-c0ffee"}


def _count(outcome: str) -> float:
    sample = gateway_metrics().registry.get_sample_value(
        "hbgw_deliveries_total", {"platform": "slack", "outcome": outcome}
    )
    return sample or 0.0


def test_a_5xx_retries_the_delivery_not_the_turn(
    tmp_path: Path, redis_url: str, redis_ns: str
) -> None:
    before = {o: _count(o) for o in ("retrying", "sent")}
    with retrying_deployment(tmp_path, redis_url, redis_ns) as (slack, model):
        fake, gw = slack.fake, slack.gw
        model.then(Text("CI is green"))
        fake.fail_next("chat.postMessage", Failure(503))
        sid = gw.session(chat="C0CHAN", thread="1700000000.000100")
        with gw.worker("w1"):
            wait_until(lambda: gw.rt.registry.live(gw.rt.now_ms()) == ["w1"], 30, "w1 live")
            run = fire_once(slack, sid)
            assert run.state == RunState.COMPLETED and run.delivery is not None
            assert run.delivery.state == DeliveryState.RETRYING
            assert "attempt 1 failed" in (run.delivery.error or "")
            run = retried(slack, sid, DeliveryState.SENT)
        assert len(model.requests()) == 1  # the model answered once; only the send was repeated
        posts = fake.of("chat.postMessage")
        assert [p.status for p in posts] == [503, 200]
        assert posts[0].params == posts[1].params  # the same text, channel and thread
        assert posts[1].params["text"] == "CI is green"  # a 5xx posted nothing: no mark
        assert run.delivery is not None
        assert (run.delivery.attempts, run.delivery.delivery_key) == (2, run.fire_id)
        assert run.delivery.platform_message_id is not None  # the answered post's ts
    assert _count("retrying") == before["retrying"] + 1
    assert _count("sent") == before["sent"] + 1


def test_a_send_without_an_answer_is_retried_as_a_possible_repeat(
    tmp_path: Path, redis_url: str, redis_ns: str
) -> None:
    with retrying_deployment(tmp_path, redis_url, redis_ns) as (slack, model):
        fake, gw = slack.fake, slack.gw
        model.then(Text("deploy done"))
        fake.fail_next("chat.postMessage", Failure(503, delay=2.5))  # past the 1 s timeout
        sid = gw.session(chat="C0CHAN", thread=None)
        with gw.worker("w1"):
            wait_until(lambda: gw.rt.registry.live(gw.rt.now_ms()) == ["w1"], 30, "w1 live")
            run = fire_once(slack, sid)
            assert run.delivery is not None and run.delivery.state == DeliveryState.RETRYING
            assert "Slack did not answer" in (run.delivery.error or "")
            retried(slack, sid, DeliveryState.SENT)
        [resent] = fake.posts()
        assert resent.params["text"] == REPEAT_MARK + "deploy done"
        assert len(model.requests()) == 1


def test_spent_retries_are_failed_with_the_reason_in_runs_and_the_api(
    tmp_path: Path, redis_url: str, redis_ns: str, hbgw: Hbgw
) -> None:
    with retrying_deployment(tmp_path, redis_url, redis_ns, delivery_retries=1) as (slack, model):
        fake, gw = slack.fake, slack.gw
        fake.fail_next("chat.postMessage", Failure(502), Failure(503))
        sid = gw.session(chat="C0CHAN", thread=None)
        with gw.worker("w1"):
            wait_until(lambda: gw.rt.registry.live(gw.rt.now_ms()) == ["w1"], 30, "w1 live")
            fire_once(slack, sid)
            run = retried(slack, sid, DeliveryState.FAILED)
        assert run.delivery is not None and run.delivery.attempts == 2
        assert (run.delivery.error or "").startswith("delivery failed after 2 attempts: Slack")
        assert len(model.requests()) == 1
        assert fake.posts() == []
        with slack.client() as client:
            page = client.get(f"/v1/sessions/{sid}/runs", headers=ADMIN).json()
        [shown] = page["runs"]
        assert shown["delivery"]["outcome"] == "failed" and shown["delivery"]["attempts"] == 2
        assert shown["delivery"]["error"] == run.delivery.error
    listed = hbgw("runs", sid)
    assert listed.code == 0, listed.err
    header, row, per_day = listed.out.splitlines()
    assert per_day.startswith("Heartbeat tokens per UTC day")
    assert header.index("delivery") == row.index("failed×2")  # the columns stay aligned
    assert "delivery failed after 2 attempts" in row
