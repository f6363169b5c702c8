"""Issue 29, finding 4, through the HTTP API: a 60 kB ``/heartbeat 1eee…e5`` took 32 s (and
held ``/healthz`` 13.6 s) and was parsed twice, once for the owner's heartbeat quota and once to
apply it. Now it is refused by its length with the grammar's sentence, stores nothing, and a
command is parsed once."""

from __future__ import annotations

from support.api_fixtures import ALICE, Api

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


def test_a_heartbeat_command_is_parsed_once_for_the_quota_and_the_answer(api: Api) -> None:
    sid = _session(api)
    assert api.gw.settings.api_max_heartbeats_per_owner > 0  # the quota reads the command
    before = parse_command.cache_info()
    with api.owner(ALICE) as alice:
        answer = alice.post(f"/v1/sessions/{sid}/messages", json={"text": "/heartbeat 9m once"})
        assert answer.json()["ok"] is True, answer.text
    after = parse_command.cache_info()
    assert (after.misses - before.misses, after.hits - before.hits) == (1, 1)
