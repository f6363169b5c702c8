"""The policies through every surface: /heartbeat in chat, `hbgw heartbeat set`, the API."""

from __future__ import annotations

import json

from support.api_fixtures import ALICE, Api
from support.cli_fixtures import Hbgw


def test_chat_and_cli_set_active_hours_jitter_and_an_end(hbgw: Hbgw) -> None:
    sid = hbgw("session", "create", "--platform", "slack", "--chat", "C1").out.strip()
    said = hbgw(
        "send", sid, "/heartbeat every 15m hours 09:00-18:00 Europe/Paris weekdays check CI"
    )
    assert said.out.strip() == (
        "♥ Heartbeat set (every 15m hours 09:00-18:00 Europe/Paris weekdays): check CI"
    )
    status = json.loads(hbgw("heartbeat", "status", sid, "--json").out)
    assert (status["active_hours"], status["active_hours_tz"], status["weekdays"]) == (
        "09:00-18:00",
        "Europe/Paris",
        True,
    )
    assert status["exact"] is False and status["times"] is None
    options = ("--hours", "22:00-06:00", "--tz", "Europe/Paris", "--exact", "--times", "3")
    cli = hbgw("heartbeat", "set", sid, "--every", "1h", *options, "--for", "7d", "night", "watch")
    assert cli.code == 0, cli.err
    assert "every 1h hours 22:00-06:00 Europe/Paris exact for 7d times 3" in cli.out
    status = json.loads(hbgw("heartbeat", "status", sid, "--json").out)
    assert (status["active_hours"], status["exact"], status["times"]) == ("22:00-06:00", True, 3)
    assert status["ends_at"].endswith("Z") and status["prompt"] == "night watch"
    bad = hbgw("heartbeat", "set", sid, "--every", "1h", "--hours", "9-5", "x")
    assert bad.code == 2 and "is not a window" in bad.err


def test_the_api_takes_policy_fields_and_policy_words(api: Api) -> None:
    with api.owner(ALICE) as alice:
        sid = api.new_session(alice)
        body = {
            "schedule": "every 15m",
            "prompt": "check CI",
            "active_hours": "09:00-18:00",
            "tz": "Europe/Paris",
            "weekdays": True,
            "exact": True,
            "for": "7d",
            "times": 5,
        }
        put = alice.put(f"/v1/sessions/{sid}/heartbeat", json=body)
        assert put.status_code == 200, put.text
        shown = put.json()["heartbeat"]
        assert (shown["active_hours"], shown["active_hours_tz"], shown["weekdays"]) == (
            "09:00-18:00",
            "Europe/Paris",
            True,
        )
        assert (shown["exact"], shown["times"]) == (True, 5) and shown["ends_at"]
        words = {"schedule": "every 15m hours 22:00-06:00 UTC times 2", "prompt": "x"}
        again = alice.put(f"/v1/sessions/{sid}/heartbeat", json=words).json()["heartbeat"]
        assert (again["active_hours"], again["times"], again["exact"]) == ("22:00-06:00", 2, False)
        bad = alice.put(
            f"/v1/sessions/{sid}/heartbeat",
            json={"schedule": "every 15m", "prompt": "x", "active_hours": "9-5"},
        )
        assert bad.status_code == 422 and "is not a window" in bad.text
