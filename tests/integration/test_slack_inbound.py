"""Slack's inbound side refuses before it stores: a forged, replayed or oversized request gets
401 or 413, a workspace outside HBGW_SLACK_TEAMS 403, and none of them leaves a session, a
message or a Redis key behind; each refusal is counted by platform and reason."""

from __future__ import annotations

import re
from pathlib import Path

from support.slack_fixtures import BOT, SECRET, Slack, event_body, message, slack_deployment


def stored(slack: Slack) -> tuple[int, int]:
    """Sessions and messages in SQL, and the Redis keys of the deployment's namespace."""
    sessions = slack.gw.store.sessions.list_sessions(limit=200)
    keys = list(slack.gw.rt.client.scan_iter(match=f"{slack.gw.settings.namespace}:inbound:*"))
    return len(sessions), len(keys)


def rejects(slack: Slack, reason: str) -> float:
    with slack.client() as client:
        text = client.get("/metrics").text
    pattern = rf'hbgw_platform_inbound_rejects_total{{platform="slack",reason="{reason}"}} (\S+)'
    found = re.search(pattern, text)
    assert found, text
    return float(found.group(1))


def test_forged_replayed_and_oversized_requests_store_nothing(slack: Slack) -> None:
    said = message(f"<@{BOT}> set me up", "1700000000.000100")
    body = event_body("Ev1", said)
    empty = stored(slack)

    forged = slack.post("/platforms/slack/events", body, secret="not-the-signing-secret")
    assert forged.status_code == 401
    assert (
        forged.json()["error"]["message"] == "The request does not carry a valid Slack signature."
    )
    with slack.client() as client:
        unsigned = client.post("/platforms/slack/events", content=body)
    assert unsigned.status_code == 401
    tampered = body.replace(b"set me up", b"set me on")
    signed_other = slack.post("/platforms/slack/events", body).request.headers
    with slack.client() as client:
        answer = client.post(
            "/platforms/slack/events",
            content=tampered,
            headers={
                k: signed_other[k] for k in ("x-slack-signature", "x-slack-request-timestamp")
            },
        )
    assert answer.status_code == 401
    # The one signed request above was taken; start the count after it.
    taken = stored(slack)
    assert taken[0] == empty[0] + 1

    replayed = slack.post("/platforms/slack/events", event_body("Ev2", said), age=301)
    assert replayed.status_code == 401
    assert "older than five minutes" in replayed.json()["error"]["message"]
    command = slack.command("hb every 1m sneak", age=600)
    assert command.status_code == 401

    big = message(f"<@{BOT}> " + "x" * 5000, "1700000000.000200")
    oversized = slack.post("/platforms/slack/events", event_body("Ev3", big))
    assert oversized.status_code == 413
    assert stored(slack) == taken
    assert rejects(slack, "signature") == 3
    assert rejects(slack, "replay") == 2
    assert rejects(slack, "too_large") == 1


def test_url_verification_and_malformed_bodies(slack: Slack) -> None:
    challenge = b'{"type": "url_verification", "token": "x", "challenge": "3eZbrw1aB"}'
    answer = slack.post("/platforms/slack/events", challenge)
    assert answer.status_code == 200 and answer.json() == {"challenge": "3eZbrw1aB"}
    not_json = slack.post("/platforms/slack/events", b"{nope")
    assert not_json.status_code == 400
    no_team = slack.post(
        "/platforms/slack/commands",
        b"command=%2Fhbgw&text=hb+status",
        headers={"Content-Type": "application/x-www-form-urlencoded"},
    )
    assert no_team.status_code == 400
    assert rejects(slack, "malformed") == 2
    assert slack.gw.store.sessions.list_sessions(limit=10) == []


def test_only_allowed_workspaces(tmp_path: Path, redis_url: str, redis_ns: str) -> None:
    with slack_deployment(tmp_path, redis_url, redis_ns, slack_teams="T0OTHER") as slack:
        said = message(f"<@{BOT}> hi", "1700000000.000100")
        assert slack.event("Ev1", said).status_code == 403
        assert slack.command("hb status").status_code == 403
        assert slack.event("Ev2", said, team="T0OTHER").status_code == 200
        assert rejects(slack, "team") == 2
        sessions = slack.gw.store.sessions.list_sessions(limit=10)
        assert [s.owner for s in sessions] == ["slack:T0OTHER"]


def test_the_command_answers_usage_and_status(slack: Slack) -> None:
    usage = slack.command("what is this")
    assert usage.json()["text"].startswith("Use /hbgw heartbeat (or /hbgw hb)")
    status = slack.command("hb status")
    assert status.status_code == 200 and status.json()["response_type"] == "ephemeral"
    bad = slack.command("hb pause")
    assert "no heartbeat" in bad.json()["text"].lower()
    assert SECRET not in bad.text
