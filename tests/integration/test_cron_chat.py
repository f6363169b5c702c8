"""/cron in a chat, through the path a user message takes (``POST /v1/sessions/{id}/messages``
→ ``gateway.inbound.receive``) on a real uvicorn, Redis and worker: a job added in a chat runs
in a fresh session delivered to that chat; list, show, pause, resume and cancel act on this
chat's jobs of the session's owner only; every bad input is answered with a sentence and
stores nothing; the per-owner job quota; the API's job list paged."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from support.api_fixtures import ALICE, BOB, Api, api_overrides
from support.harness import Gateway, gateway_settings, wait_until
from support.http_server import serving

from hbgw.gateway.api.app import create_app


def say(who: httpx.Client, sid: str, text: str) -> dict[str, Any]:
    answer = who.post(f"/v1/sessions/{sid}/messages", json={"text": text})
    assert answer.status_code == 200, answer.text
    body: dict[str, Any] = answer.json()
    assert body["kind"] == "command"
    return body


def added(who: httpx.Client, sid: str, text: str) -> str:
    body = say(who, sid, text)
    assert body["ok"] is True, body
    assert body["reply"].startswith("⏰ Cron job j"), body
    return str(body["reply"].split()[3])


def test_a_job_added_in_a_chat_runs_fresh_and_is_delivered_to_that_chat(api: Api) -> None:
    gw = api.gw
    with gw.worker("w1"), api.owner(ALICE) as alice:
        sid = api.new_session(alice)
        jid = added(alice, sid, "/cron add in 1s -- remind me to deploy")
        job = gw.store.jobs.job(jid)
        assert job.owner == ALICE and job.route.session_id is None
        assert (job.route.platform, job.route.chat, job.route.thread) == ("slack", "C1", "T1")

        def ran() -> Any:
            gw.tick()
            runs = gw.store.jobs.job_runs(jid)
            return runs if runs and runs[0].state == "completed" else None

        [run] = wait_until(ran, 30, "the job's run")
        assert run.session_id != sid  # a fresh conversation, not this one
        [sent] = [d for d in gw.deliveries(run.session_id) if d["call"] == "send"]
        assert (sent["chat"], sent["thread"]) == ("C1", "T1")
        assert f"Cron job {jid}" in sent["text"]
        assert not [
            m for m in gw.store.messages.messages_after(sid, 0, limit=50) if m.role == "user"
        ]
        listed = say(alice, sid, "/cron list")["reply"]
        assert jid in listed and "completed" in listed
        again = say(alice, sid, f"/cron cancel {jid}")
        assert again["ok"] is False and "already completed" in again["reply"]


def test_list_show_pause_resume_cancel(api: Api) -> None:
    with api.owner(ALICE) as alice:
        sid = api.new_session(alice)
        assert "No cron jobs deliver to this chat" in say(alice, sid, "/cron list")["reply"]
        jid = added(alice, sid, "/cron add every 2h -- check CI")
        assert jid in say(alice, sid, "/cron")["reply"]
        shown = say(alice, sid, f"/cron show {jid}")["reply"]
        assert "every 2h" in shown and "check CI" in shown and "active" in shown
        assert "paused" in say(alice, sid, f"/cron pause {jid}")["reply"]
        assert api.gw.store.jobs.job(jid).next_due is None
        twice = say(alice, sid, f"/cron pause {jid}")
        assert twice["ok"] is False and twice["error"]["code"] == "invalid_state"
        assert "already paused" in twice["reply"]
        assert "resumed" in say(alice, sid, f"/cron resume {jid}")["reply"]
        assert api.gw.store.jobs.job(jid).next_due is not None
        assert "cancelled" in say(alice, sid, f"/cron cancel {jid}")["reply"]
        cancelled = say(alice, sid, f"/cron cancel {jid}")
        assert cancelled["ok"] is False and "already cancelled" in cancelled["reply"]
        assert "/cron add" in say(alice, sid, "/cron help")["reply"]


def test_another_owners_and_another_chats_jobs_are_not_here(api: Api) -> None:
    with api.owner(ALICE) as alice, api.owner(BOB) as bob:
        sid = api.new_session(alice)
        jid = added(alice, sid, "/cron add @daily -- summary")
        elsewhere = api.new_session(alice, chat="C2")
        strangers = api.new_session(bob)
        for who, where in ((alice, elsewhere), (bob, strangers)):
            for verb in ("show", "pause", "cancel"):
                refused = say(who, where, f"/cron {verb} {jid}")
                assert refused["ok"] is False and refused["error"]["code"] == "not_found"
                assert f"no cron job {jid} in this chat" in refused["reply"]
            assert jid not in say(who, where, "/cron list")["reply"]
        assert api.gw.store.jobs.job(jid).status == "active"


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("/cron add", "needs a schedule and a prompt"),
        ("/cron add in 10m --", "The prompt is required"),
        ("/cron add 1-2-3 * * * * -- x", "minute"),
        ("/cron add at 2020-01-01T00:00Z -- x", "in the past"),
        ("/cron add every 0.5s -- x", "minimum"),
        ("/cron add TZ=Nowhere/City 0 9 * * * -- x", "Nowhere/City"),
        ("/cron frobnicate", "is not a /cron command"),
        ("/cron cancel", "needs a job id"),
        ("/cron show j00000000000", "no cron job j00000000000 in this chat"),
    ],
)
def test_bad_input_is_answered_with_a_sentence_and_stores_nothing(
    api: Api, text: str, words: str
) -> None:
    with api.owner(ALICE) as alice:
        sid = api.new_session(alice)
        answer = say(alice, sid, text)
        assert answer["ok"] is False and words in answer["reply"], answer
        assert api.gw.store.jobs.jobs() == []
        assert api.gw.store.messages.messages_after(sid, 0, limit=50) == []


@pytest.fixture
def two_jobs(tmp_path: Path, redis_url: str, redis_ns: str) -> Iterator[Api]:
    """The API with HBGW_API_MAX_JOBS_PER_OWNER=2."""
    values = {**api_overrides(), "api_max_jobs_per_owner": 2}
    settings = gateway_settings(tmp_path, redis_url, redis_ns, **values)
    gw = Gateway(settings, redis_url)
    try:
        with serving(create_app(settings, celery_app=gw.app, redis_url=redis_url)) as url:
            yield Api(url, gw)
    finally:
        gw.close()


def test_the_job_quota_binds_cron_add_and_the_api_not_the_operator(two_jobs: Api) -> None:
    api = two_jobs
    with api.owner(ALICE) as alice, api.admin() as admin:
        sid = api.new_session(alice)
        first = added(alice, sid, "/cron add every 2h -- one")
        body = {"schedule": "@daily", "prompt": "two", "session_id": sid}
        assert alice.post("/v1/cron", json=body).status_code == 201
        third = say(alice, sid, "/cron add every 3h -- three")
        assert third["ok"] is False and third["error"]["code"] == "quota_exceeded"
        assert "HBGW_API_MAX_JOBS_PER_OWNER" in third["reply"]
        refused = alice.post("/v1/cron", json=body)
        assert refused.status_code == 429 and refused.json()["error"]["code"] == "quota_exceeded"
        assert len(api.gw.store.jobs.jobs(owner=ALICE)) == 2
        assert admin.post("/v1/cron", json=body).status_code == 201  # the operator's own
        say(alice, sid, f"/cron cancel {first}")  # a cancelled job frees its slot
        added(alice, sid, "/cron add every 3h -- three")


def test_the_api_pages_the_job_list(api: Api) -> None:
    with api.owner(ALICE) as alice:
        sid = api.new_session(alice)
        made = [added(alice, sid, f"/cron add every {n}h -- job {n}") for n in (1, 2, 3)]
        page = alice.get("/v1/cron", params={"limit": 2}).json()
        assert [j["id"] for j in page["jobs"]] == made[:2] and page["next_after"] == made[1]
        rest = alice.get("/v1/cron", params={"limit": 2, "after": page["next_after"]}).json()
        assert [j["id"] for j in rest["jobs"]] == made[2:] and rest["next_after"] is None
        bad = alice.get("/v1/cron", params={"after": "nope"})
        assert bad.status_code == 422 and "is not a job id" in bad.text
