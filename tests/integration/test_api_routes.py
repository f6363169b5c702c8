"""Every route of the HTTP API, happy path, through a real uvicorn server on loopback."""

from __future__ import annotations

from support.api_fixtures import ALICE, Api
from support.harness import wait_until


def test_sessions_create_show_list(api: Api) -> None:
    with api.owner(ALICE) as alice:
        created = alice.post("/v1/sessions", json={"platform": "slack", "chat": "C1"})
        assert created.status_code == 201
        body = created.json()
        assert body["owner"] == ALICE and body["status"] == "active" and body["thread"] is None
        sid = body["id"]
        shown = alice.get(f"/v1/sessions/{sid}").json()
        assert shown["id"] == sid and shown["active_id"] == sid
        listed = alice.get("/v1/sessions").json()
        assert [s["id"] for s in listed["sessions"]] == [sid]
        assert listed["next_after"] is None


def test_sessions_list_pages(api: Api) -> None:
    with api.owner(ALICE) as alice:
        ids = sorted(api.new_session(alice, chat=f"C{i}") for i in range(3))
        first = alice.get("/v1/sessions", params={"limit": 2}).json()
        assert [s["id"] for s in first["sessions"]] == ids[:2]
        rest = alice.get("/v1/sessions", params={"limit": 2, "after": first["next_after"]})
        assert [s["id"] for s in rest.json()["sessions"]] == ids[2:]


def test_a_message_runs_a_turn_and_the_conversation_reads_back(api: Api) -> None:
    with api.gw.worker("w1"), api.owner(ALICE) as alice:
        sid = api.new_session(alice)
        posted = alice.post(f"/v1/sessions/{sid}/messages", json={"text": "hello"})
        assert posted.status_code == 202
        accepted = posted.json()
        assert accepted["kind"] == "message" and accepted["session_id"] == sid
        assert accepted["duplicate"] is False and accepted["handed_off"] is True

        def conversation() -> list[dict[str, object]] | None:
            messages = alice.get(f"/v1/sessions/{sid}/messages").json()["messages"]
            return messages if len(messages) == 2 else None

        user, reply = wait_until(conversation, 30, "the reply")
        assert user["id"] == accepted["message_id"] and user["text"] == "hello"
        assert reply["role"] == "assistant" and reply["reply_to"] == accepted["message_id"]
        assert reply["text"] == "user reply to: hello" and reply["heartbeat"] is False
        page = alice.get(f"/v1/sessions/{sid}/messages", params={"limit": 1}).json()
        assert [m["id"] for m in page["messages"]] == [user["id"]]
        after = {"after": page["next_after"]}
        rest = alice.get(f"/v1/sessions/{sid}/messages", params=after).json()
        assert [m["id"] for m in rest["messages"]] == [reply["id"]]
        assert rest["next_after"] is None


def test_a_slash_command_is_answered_in_the_response(api: Api) -> None:
    with api.owner(ALICE) as alice:
        sid = api.new_session(alice)
        answer = alice.post(f"/v1/sessions/{sid}/messages", json={"text": "/heartbeat 10m check"})
        assert answer.status_code == 200
        assert answer.json() == {
            "kind": "command",
            "session_id": sid,
            "ok": True,
            "reply": "♥ Heartbeat set (every 10m): check",
        }
        assert api.gw.rt.index.due_ms(sid) is not None  # it reached the due index


def test_heartbeat_routes(api: Api) -> None:
    with api.owner(ALICE) as alice:
        sid = api.new_session(alice)
        url = f"/v1/sessions/{sid}/heartbeat"
        missing = alice.get(url)
        assert missing.status_code == 404 and missing.json()["error"]["code"] == "no_heartbeat"
        put = alice.put(url, json={"schedule": "every 15m", "prompt": "check CI"})
        assert put.status_code == 200, put.text
        assert put.json()["reply"] == "♥ Heartbeat set (every 15m): check CI"
        assert put.json()["heartbeat"]["status"] == "active"
        assert api.gw.rt.index.due_ms(sid) is not None
        shown = alice.get(url).json()
        assert shown["prompt"] == "check CI" and shown["interval_seconds"] == 900
        paused = alice.post(f"{url}/pause").json()
        assert paused["heartbeat"]["status"] == "paused" and api.gw.rt.index.due_ms(sid) is None
        resumed = alice.post(f"{url}/resume").json()
        assert resumed["heartbeat"]["status"] == "active"
        cron = alice.put(url, json={"schedule": "cron 0 9 * * 1-5", "prompt": "standup"})
        assert cron.json()["heartbeat"]["cron"] == "0 9 * * 1-5", cron.text
        deleted = alice.delete(url)
        assert deleted.status_code == 200 and "cleared" in deleted.json()["reply"].lower()
        assert alice.get(url).status_code == 404 and api.gw.rt.index.due_ms(sid) is None


def test_lifecycle_routes(api: Api) -> None:
    with api.owner(ALICE) as alice:
        sid = api.new_session(alice)
        alice.put(f"/v1/sessions/{sid}/heartbeat", json={"schedule": "10m", "prompt": "check"})
        compressed = alice.post(f"/v1/sessions/{sid}/compress").json()
        child = compressed["session"]["id"]
        assert compressed["session"]["parent_id"] == sid and child in compressed["reply"]
        assert alice.get(f"/v1/sessions/{sid}").json()["active_id"] == child
        assert api.gw.rt.index.due_ms(child) is not None and api.gw.rt.index.due_ms(sid) is None
        # The heartbeat routes follow the compression to where the heartbeat moved.
        assert alice.get(f"/v1/sessions/{sid}/heartbeat").json()["session_id"] == child
        reset = alice.post(f"/v1/sessions/{child}/reset").json()
        assert reset["session"]["conversation"] == 2 and api.gw.rt.index.due_ms(child) is None
        suspended = alice.post(f"/v1/sessions/{child}/suspend").json()
        assert suspended["session"]["status"] == "suspended"
        again = alice.post(f"/v1/sessions/{child}/suspend")
        assert again.status_code == 409 and again.json()["error"]["code"] == "invalid_state"
        text = alice.post(f"/v1/sessions/{child}/messages", json={"text": "hi"})
        assert text.status_code == 409 and text.json()["error"]["code"] == "invalid_state"
        resumed = alice.post(f"/v1/sessions/{child}/resume").json()
        assert resumed["session"]["status"] == "active"


def test_runs_route(api: Api) -> None:
    with api.gw.worker("w1"), api.owner(ALICE) as alice:
        sid = api.new_session(alice)
        assert alice.get(f"/v1/sessions/{sid}/runs").json()["runs"] == []
        wait_until(lambda: api.gw.rt.registry.live(api.gw.rt.now_ms()) == ["w1"], 30, "w1")
        api.gw.due_now(sid)
        api.gw.tick()
        api.gw.final_runs(sid)
        runs = alice.get(f"/v1/sessions/{sid}/runs").json()["runs"]
        assert [r["state"] for r in runs] == ["completed"] and runs[0]["session_id"] == sid
        [sent] = api.gw.deliveries(sid, "send")
        delivery = runs[0]["delivery"]
        assert (delivery["state"], delivery["attempts"], delivery["channel"]) == ("sent", 1, "file")
        assert delivery["platform_message_id"] == sent["message_id"] and delivery["error"] is None


def test_health_ready_metrics(api: Api) -> None:
    with api.client(None) as anyone, api.owner(ALICE) as alice:
        assert anyone.get("/healthz").json() == {"status": "ok"}
        assert anyone.get("/readyz").json() == {"status": "ready"}
        with api.admin() as admin:
            ready = admin.get("/readyz")
        assert ready.status_code == 200
        assert ready.json() == {
            "status": "ready",
            "checks": {"database": "ok", "schema": "ok", "redis": "ok"},
        }
        sid = api.new_session(alice)
        alice.post(f"/v1/sessions/{sid}/messages", json={"text": "/heartbeat status"})
        alice.post(f"/v1/sessions/{sid}/messages", json={"text": "hello"})
        metrics = anyone.get("/metrics")
        assert metrics.status_code == 200
        assert metrics.headers["content-type"].startswith("text/plain")
        text = metrics.text
        assert (
            'hbgw_api_requests_total{method="POST",route="/v1/sessions",status="201"} 1.0' in text
        )
        assert "hbgw_api_messages_accepted_total 1.0" in text
        assert 'hbgw_api_commands_answered_total{ok="true"} 1.0' in text
        assert "hbgw_api_event_streams_open 0.0" in text
        assert "hbgw_api_request_seconds_bucket" in text
        anyone.get("/openapi.json")
        anyone.get("/v1/sessions/s-unknown-probe")
        text = anyone.get("/metrics").text
        assert 'route="/openapi.json",status="200"' in text
        assert 'route="/v1/sessions/{session_id}",status="401"' in text
        assert "s-unknown-probe" not in text


def test_openapi_document(api: Api) -> None:
    with api.client(None) as anyone:
        schema = anyone.get("/openapi.json").json()
    assert "/v1/sessions/{session_id}/events" in schema["paths"]
    assert set(schema["paths"]["/v1/sessions/{session_id}/heartbeat"]) == {"get", "put", "delete"}
