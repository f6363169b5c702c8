"""A route gone for good stops spending tokens (issue 17, item 6), end to end with real workers,
the fake Slack Web API and the fake model: Slack refuses the heartbeat's message for good
(``not_in_channel``, and an HTTP 403), the heartbeat is paused with the reason — in Slack's
``/hbgw heartbeat status``, ``hbgw heartbeat status`` (and ``--json``) and the API — and a due
time backdated past it fires nothing: no run, no model call. Resuming clears the reason."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.cli_fixtures import Hbgw
from support.delivery_fixtures import retrying_deployment
from support.fake_openai import Text
from support.fake_slack import Failure
from support.harness import wait_until
from support.slack_fixtures import CHANNEL, TEAM, Slack

from hbgw.core.clock import utcnow
from hbgw.core.metrics import gateway_metrics
from hbgw.sessions.states import DeliveryState, HeartbeatStatus, RunState

ADMIN = {"Authorization": "Bearer tok-admin-c0ffee"}


def _channel_session(slack: Slack) -> str:
    session = slack.gw.store.sessions.session_at(
        platform="slack", chat=CHANNEL, thread=None, now=utcnow(), owner=f"slack:{TEAM}",
        create=False,
    )  # fmt: skip
    assert session is not None
    return session.id


def _failed(outcome: str = "failed") -> float:
    sample = gateway_metrics().registry.get_sample_value(
        "hbgw_deliveries_total", {"platform": "slack", "outcome": outcome}
    )
    return sample or 0.0


@pytest.mark.parametrize(
    ("refusal", "word"),
    [(Failure(200, error="not_in_channel"), "not_in_channel"), (Failure(403), "fatal_error")],
)
def test_a_permanent_refusal_pauses_the_heartbeat_with_its_reason(
    tmp_path: Path, redis_url: str, redis_ns: str, hbgw: Hbgw, refusal: Failure, word: str
) -> None:
    before = _failed()
    with retrying_deployment(tmp_path, redis_url, redis_ns) as (slack, model):
        fake, gw = slack.fake, slack.gw
        model.then(Text("all quiet"))
        fake.fail_next("chat.postMessage", refusal)
        assert slack.command("heartbeat every 1m check the deploy").status_code == 200
        sid = _channel_session(slack)
        with gw.worker("w1"):
            wait_until(lambda: gw.rt.registry.live(gw.rt.now_ms()) == ["w1"], 30, "w1 live")
            gw.tick()  # set a minute ago by the API's clock: due now
            [run] = gw.final_runs(sid)
            assert run.state == RunState.FAILED and run.delivery is not None
            assert run.delivery.state == DeliveryState.FAILED  # no retry: it cannot help
            reason = f"Slack refused the message for good ({word})"
            _check_paused(slack, sid, hbgw, reason)
            # Due again (backdated): nothing fires, nothing reaches the model.
            gw.rt.index.schedule(sid, gw.rt.now_ms() - 1000)
            gw.tick()
            wait_until(lambda: gw.rt.index.due_ms(sid) is None, 10, "the entry dropped")
        assert len(gw.runs(sid)) == 1 and len(model.requests()) == 1
        assert _failed() == before + 1
        resumed = slack.command("heartbeat resume")
        assert resumed.json()["text"].startswith("♥ Heartbeat resumed")
        status = gw.store.heartbeats.heartbeat_status(sid, utcnow()).to_json()
        assert (status["status"], status["paused_reason"]) == ("active", None)


def _check_paused(slack: Slack, sid: str, hbgw: Hbgw, reason: str) -> None:
    said = slack.command("heartbeat status").json()["text"]
    assert said.startswith("♥ Heartbeat paused") and f"paused: {reason}" in said, said
    assert "/heartbeat resume starts it again" in said
    shown = hbgw("heartbeat", "status", sid)
    assert shown.code == 0 and f"paused: {reason}" in shown.out, shown
    as_json = hbgw("heartbeat", "status", sid, "--json")
    assert '"status": "paused"' in as_json.out and reason in as_json.out
    with slack.client() as client:
        api = client.get(f"/v1/sessions/{sid}/heartbeat", headers=ADMIN).json()
    assert api["status"] == HeartbeatStatus.PAUSED and api["paused_reason"].startswith(reason)
