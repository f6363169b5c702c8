"""/v1/cron through a real uvicorn on loopback: owner-scoped like sessions, the grammar's
sentences as 422, a second cancel 409 "already cancelled", and a job's run read back."""

from __future__ import annotations

from support.api_fixtures import ALICE, BOB, Api
from support.harness import wait_until


def test_cron_add_list_show_pause_resume_cancel_and_runs(api: Api) -> None:
    with api.owner(ALICE) as alice:
        sid = api.new_session(alice)
        body = {"schedule": "every 2h", "prompt": "check CI", "session_id": sid}
        created = alice.post("/v1/cron", json=body)
        assert created.status_code == 201, created.text
        job = created.json()
        assert (job["owner"], job["status"], job["interval_seconds"]) == (ALICE, "active", 7200)
        jid = job["id"]
        assert [j["id"] for j in alice.get("/v1/cron").json()["jobs"]] == [jid]
        assert alice.get(f"/v1/cron/{jid}").json()["prompt"] == "check CI"
        assert alice.post(f"/v1/cron/{jid}/pause").json()["status"] == "paused"
        again = alice.post(f"/v1/cron/{jid}/pause")
        assert again.status_code == 409 and "already paused" in again.text
        assert alice.post(f"/v1/cron/{jid}/resume").json()["status"] == "active"
        assert alice.delete(f"/v1/cron/{jid}").json()["status"] == "cancelled"
        twice = alice.post(f"/v1/cron/{jid}/cancel")
        assert twice.status_code == 409 and "already cancelled" in twice.text
        assert alice.get(f"/v1/cron/{jid}/runs").json() == []


def test_another_owners_job_and_session_answer_like_missing_ones(api: Api) -> None:
    with api.owner(ALICE) as alice, api.owner(BOB) as bob:
        sid = api.new_session(alice)
        jid = alice.post(
            "/v1/cron", json={"schedule": "@daily", "prompt": "x", "session_id": sid}
        ).json()["id"]
        for path in (f"/v1/cron/{jid}", f"/v1/cron/{jid}/runs"):
            assert bob.get(path).status_code == 404
        assert bob.post(f"/v1/cron/{jid}/cancel").status_code == 404
        assert bob.get("/v1/cron").json()["jobs"] == []
        stolen = bob.post("/v1/cron", json={"schedule": "@daily", "prompt": "x", "session_id": sid})
        assert stolen.status_code == 404
        assert alice.get(f"/v1/cron/{jid}").json()["status"] == "active"


def test_bad_input_is_422_with_the_sentence_and_stores_nothing(api: Api) -> None:
    with api.owner(ALICE) as alice:
        sid = api.new_session(alice)
        for schedule, words in (
            ("1-2-3 * * * *", "minute field"),
            ("every 0.5s", "minimum"),
            ("at 2020-01-01T00:00Z", "in the past"),
        ):
            answer = alice.post(
                "/v1/cron", json={"schedule": schedule, "prompt": "x", "session_id": sid}
            )
            assert answer.status_code == 422 and words in answer.text, answer.text
        no_target = alice.post("/v1/cron", json={"schedule": "@daily", "prompt": "x"})
        assert no_target.status_code == 422 and "needs a target" in no_target.text
        assert alice.get("/v1/cron").json()["jobs"] == []


def test_a_routed_jobs_run_is_read_back_with_its_delivery(api: Api) -> None:
    gw = api.gw
    with gw.worker("w1"), api.owner(ALICE) as alice:
        body = {"schedule": "in 1s", "prompt": "remind me", "platform": "slack", "chat": "CJ"}
        jid = alice.post("/v1/cron", json=body).json()["id"]

        def ran() -> list[dict[str, object]] | None:
            gw.tick()
            runs = alice.get(f"/v1/cron/{jid}/runs").json()
            return runs if runs and runs[0]["state"] == "completed" else None

        [run] = wait_until(ran, 30, "the job's run")
        assert run["job_id"] == jid and run["delivery"]["state"] == "sent"
        assert alice.get(f"/v1/cron/{jid}").json()["status"] == "completed"
