"""Issue 29, finding 4, through the HTTP API: a 60 kB ``/heartbeat 1eee…e5`` took 32 s (and
held ``/healthz`` 13.6 s) and was parsed twice, once for the owner's heartbeat quota and once to
apply it; a signed Slack command of 40k characters took 15 s. Now it is refused by its length
with the grammar's sentence, stores nothing, and a command is parsed once."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
from support.api_fixtures import ALICE, Api
from support.slack_fixtures import slack_deployment

from hbgw.sessions.grammar.slash import parse_command


def _session(api: Api) -> str:
    with api.owner(ALICE) as alice:
        made = alice.post("/v1/sessions", json={"platform": "api", "chat": "grammar"})
        assert made.status_code == 201, made.text
        return str(made.json()["id"])


def test_a_60k_heartbeat_line_is_refused_by_its_length_and_stores_nothing(api: Api) -> None:
    sid = _session(api)
    line = "/heartbeat 1" + "e" * 60_000 + "5"
    with api.owner(ALICE) as alice:
        answer = alice.post(f"/v1/sessions/{sid}/messages", json={"text": line})
        assert answer.status_code == 200, answer.text
        body = answer.json()
        assert body["ok"] is False and body["error"]["code"] == "invalid_input"
        assert body["reply"].startswith("The /heartbeat command is too long — 60013 characters")
        assert alice.get(f"/v1/sessions/{sid}/heartbeat").status_code == 404
        assert alice.get("/healthz").status_code == 200


def test_a_heartbeat_command_is_parsed_once_for_the_quota_and_the_answer(
    api: Api, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Defect: the API parsed a command to count it against the quota, then again to apply it.
    Every module's binding of the parser is counted (the quota is the store's now)."""
    sid = _session(api)
    assert api.gw.settings.api_max_heartbeats_per_owner > 0  # the quota is on
    calls: list[str] = []
    parse = parse_command

    def counted(text: str, *args: Any) -> Any:
        calls.append(text)
        return parse(text, *args)

    for module in list(sys.modules.values()):
        if module is not sys.modules[__name__] and getattr(module, "parse_command", None) is parse:
            monkeypatch.setattr(module, "parse_command", counted)
    with api.owner(ALICE) as alice:
        answer = alice.post(f"/v1/sessions/{sid}/messages", json={"text": "/heartbeat 9m once"})
        assert answer.json()["ok"] is True, answer.text
    assert calls == ["/heartbeat 9m once"]


def test_a_signed_slack_command_of_40k_characters_gets_the_length_sentence(
    tmp_path: Path, redis_url: str, redis_ns: str
) -> None:
    with slack_deployment(tmp_path, redis_url, redis_ns, api_max_body_bytes=65536) as slack:
        answer = slack.command("hb 1" + "e" * 40_000 + "5")
        assert answer.status_code == 200, answer.text
        assert answer.json()["text"].startswith("The /heartbeat command is too long — 40006 ")
        sessions = slack.gw.store.sessions.list_sessions(limit=10)
        assert all(slack.gw.store.heartbeats.get_heartbeat(s.id) is None for s in sessions)


def test_a_put_heartbeat_prompt_too_long_gets_the_prompts_own_sentence(api: Api) -> None:
    sid = _session(api)
    spec = {"schedule": "every 5m", "prompt": "p" * 20_000}
    with api.owner(ALICE) as alice:
        answer = alice.put(f"/v1/sessions/{sid}/heartbeat", json=spec)
    assert answer.status_code == 422, answer.text
    assert answer.json()["error"]["message"] == (
        "The prompt is too long — 20000 characters; the limit is 4000."
    )
