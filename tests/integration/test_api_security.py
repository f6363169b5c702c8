"""Security findings of the HTTP API (issue 15), each through a real uvicorn on loopback."""

from __future__ import annotations

import random
import socket
import string
import threading
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import httpx
import pytest
from sqlalchemy import event, select
from sqlalchemy.orm import Session
from support.api_fixtures import ALICE, BOB, Api, EventReader, api_overrides
from support.harness import Gateway, gateway_settings, wait_until
from support.http_server import serving

from hbgw.gateway.api.app import create_app
from hbgw.gateway.api.server import api_server
from hbgw.sessions.models import HeartbeatRow, RunRow
from hbgw.sessions.states import RunState


def _series(anyone: httpx.Client) -> set[str]:
    text = anyone.get("/metrics").text
    return {line.rsplit(" ", 1)[0] for line in text.splitlines() if line.startswith("hbgw_api_")}


def _random_requests(anyone: httpx.Client, count: int, rng: random.Random) -> None:
    for _ in range(count):
        method = "".join(rng.choices(string.ascii_uppercase, k=rng.randint(3, 40)))
        path = "/" + "".join(rng.choices(string.ascii_lowercase, k=rng.randint(1, 30)))
        anyone.request(method, path)
        anyone.request(rng.choice(["GET", "DELETE", "PATCH"]), path)
        anyone.request(method, "/v1/sessions")


def test_metrics_series_stay_bounded_whatever_the_requests(api: Api) -> None:
    rng = random.Random(15)
    with api.client(None) as anyone:
        _random_requests(anyone, 10, rng)
        _series(anyone)  # the scrape's own series
        before = _series(anyone)
        _random_requests(anyone, 20, rng)
        after = _series(anyone)
    assert after == before, sorted(after - before)[:5]
    assert any('method="other"' in s and 'route="unmatched"' in s for s in after)


def test_a_last_event_id_of_unicode_digits_is_a_clear_422(
    api: Api, caplog: pytest.LogCaptureFixture
) -> None:
    with api.owner(ALICE) as alice:
        sid = api.new_session(alice)
        # b"\xb2" is '²' in latin-1, how the server reads header bytes: isdigit(), not int().
        answer = alice.get(f"/v1/sessions/{sid}/events", headers={b"Last-Event-ID": b"\xb2"})
    assert answer.status_code == 422, answer.text
    assert answer.json()["error"]["code"] == "invalid_input"
    assert "Last-Event-ID" in answer.json()["error"]["message"]
    assert not [r for r in caplog.records if r.levelname == "ERROR"]


# A cron schedule that parses but is longer than its column (255 characters).
LONG_CRON = "cron {} {} {} * *".format(
    ",".join(map(str, range(60))), ",".join(map(str, range(24))), ",".join(map(str, range(1, 29)))
)


def test_a_schedule_longer_than_its_column_is_refused_before_sql(api: Api) -> None:
    assert len(LONG_CRON) > 255
    with api.owner(ALICE) as alice:
        sid = api.new_session(alice)
        put = alice.put(
            f"/v1/sessions/{sid}/heartbeat", json={"schedule": LONG_CRON, "prompt": "check"}
        )
        assert put.status_code == 422, put.text
        assert "at most 255" in put.json()["error"]["message"]
        command = alice.post(
            f"/v1/sessions/{sid}/messages", json={"text": f"/heartbeat {LONG_CRON} check"}
        )
        assert command.status_code == 200 and command.json()["ok"] is False, command.text
        assert "at most 255" in command.json()["reply"]
        assert alice.get(f"/v1/sessions/{sid}/heartbeat").status_code == 404


def test_readyz_tells_the_database_details_only_to_the_admin(
    tmp_path: Path, redis_url: str, redis_ns: str
) -> None:
    # Nothing listens on port 1: the database check fails with the server's own words.
    overrides = {**api_overrides(), "database_url": "postgresql://dbuser:pw@127.0.0.1:1/dbname"}
    settings = gateway_settings(tmp_path, redis_url, redis_ns, **overrides)
    with serving(create_app(settings, redis_url=redis_url)) as url:
        api = Api(url, None)  # type: ignore[arg-type]
        with api.client(None) as anyone, api.owner(ALICE) as alice, api.admin() as admin:
            for who in (anyone, alice):
                answer = who.get("/readyz")
                assert answer.status_code == 503
                assert answer.json() == {"status": "not_ready"}
            detailed = admin.get("/readyz")
    assert detailed.status_code == 503
    assert detailed.json()["checks"]["database"] != "ok"


TIGHT = {
    "api_max_sessions_per_owner": 3,
    "api_max_heartbeats_per_owner": 2,
    "api_max_streams_per_owner": 2,
    "api_messages_per_minute": 3,
}


@pytest.fixture
def tight(tmp_path: Path, redis_url: str, redis_ns: str) -> Iterator[Api]:
    """The API with small quotas and message rate."""
    settings = gateway_settings(tmp_path, redis_url, redis_ns, **api_overrides(), **TIGHT)
    gw = Gateway(settings, redis_url)
    try:
        with serving(create_app(settings, celery_app=gw.app, redis_url=redis_url)) as url:
            yield Api(url, gw)
    finally:
        gw.close()


def _refused(answer: httpx.Response, code: str) -> None:
    assert answer.status_code == 429, answer.text
    assert answer.json()["error"]["code"] == code


def test_an_owner_holds_at_most_its_quota_of_sessions(tight: Api) -> None:
    with tight.owner(ALICE) as alice, tight.owner(BOB) as bob, tight.admin() as admin:
        first = [tight.new_session(alice, chat=f"C{i}") for i in range(3)]
        _refused(
            alice.post("/v1/sessions", json={"platform": "slack", "chat": "C4"}), "quota_exceeded"
        )
        assert (
            "HBGW_API_MAX_SESSIONS_PER_OWNER"
            in alice.post("/v1/sessions", json={"platform": "slack", "chat": "C4"}).json()["error"][
                "message"
            ]
        )
        tight.new_session(bob)  # another owner's quota is its own
        assert alice.post(f"/v1/sessions/{first[0]}/suspend").status_code == 200
        _refused(
            alice.post("/v1/sessions", json={"platform": "slack", "chat": "C4"}), "quota_exceeded"
        )
        # A closed session (a reset keeps it open; a compression closes the parent) frees a slot.
        assert alice.post(f"/v1/sessions/{first[1]}/compress").status_code == 200
        _refused(
            alice.post("/v1/sessions", json={"platform": "slack", "chat": "C4"}), "quota_exceeded"
        )
        new = admin.post("/v1/sessions", json={"platform": "slack", "chat": "C5", "owner": ALICE})
        assert new.status_code == 201  # the operator is not held to owners' quotas


def test_an_owner_holds_at_most_its_quota_of_heartbeats(tight: Api) -> None:
    spec = {"schedule": "every 5m", "prompt": "check"}
    with tight.owner(ALICE) as alice:
        sids = [tight.new_session(alice, chat=f"C{i}") for i in range(3)]
        assert alice.put(f"/v1/sessions/{sids[0]}/heartbeat", json=spec).status_code == 200
        sent = alice.post(f"/v1/sessions/{sids[1]}/messages", json={"text": "/heartbeat 5m go"})
        assert sent.json()["ok"] is True
        _refused(alice.put(f"/v1/sessions/{sids[2]}/heartbeat", json=spec), "quota_exceeded")
        command = alice.post(f"/v1/sessions/{sids[2]}/messages", json={"text": "/heartbeat 5m x"})
        _refused(command, "quota_exceeded")
        # Replacing a session's own heartbeat adds none; clearing one frees a slot.
        assert alice.put(f"/v1/sessions/{sids[0]}/heartbeat", json=spec).status_code == 200
        assert alice.delete(f"/v1/sessions/{sids[1]}/heartbeat").status_code == 200
        assert alice.put(f"/v1/sessions/{sids[2]}/heartbeat", json=spec).status_code == 200


def test_a_session_takes_at_most_its_rate_of_messages(tight: Api) -> None:
    with tight.owner(ALICE) as alice:
        sid, other = tight.new_session(alice), tight.new_session(alice, chat="C2")
        for i in range(3):
            sent = alice.post(f"/v1/sessions/{sid}/messages", json={"text": f"m{i}"})
            assert sent.status_code == 202, sent.text
        over = alice.post(f"/v1/sessions/{sid}/messages", json={"text": "one too many"})
        _refused(over, "rate_limited")
        assert 1 <= int(over.headers["Retry-After"]) <= 60
        assert alice.post(f"/v1/sessions/{other}/messages", json={"text": "hi"}).status_code == 202
        # The window lives in Redis with its own expiry: every replica shares it, and it ends.
        key = tight.gw.rt.keys.message_rate(sid)
        assert 0 < tight.gw.rt.client.pttl(key) <= 60_000
        tight.gw.rt.client.pexpire(key, 1)
        wait_until(lambda: not tight.gw.rt.client.exists(key), 5, "the window to end")
        assert alice.post(f"/v1/sessions/{sid}/messages", json={"text": "again"}).status_code == 202


def test_an_owner_keeps_at_most_its_quota_of_streams_open(tight: Api) -> None:
    with tight.owner(ALICE) as alice, tight.owner(BOB) as bob:
        sid, bobs = tight.new_session(alice), tight.new_session(bob)
        path = f"/v1/sessions/{sid}/events"
        with EventReader(alice, path), EventReader(alice, path):
            _refused(alice.get(path), "quota_exceeded")
            with EventReader(bob, f"/v1/sessions/{bobs}/events") as bobs_stream:
                assert bobs_stream.status == 200
        # Closed streams give their slots back.
        with EventReader(alice, path) as again:
            assert again.status == 200


def test_runs_page_in_sql_newest_first_with_a_keyset(api: Api) -> None:
    with api.owner(ALICE) as alice:
        sid = api.new_session(alice)
        alice.put(f"/v1/sessions/{sid}/heartbeat", json={"schedule": "5m", "prompt": "check"})
        ids = [api.public_id(i) for i in _insert_runs(api, sid, 12)]
        page = alice.get(f"/v1/sessions/{sid}/runs", params={"limit": 5}).json()
        assert [r["id"] for r in page["runs"]] == ids[-5:]
        older = {"limit": 5, "before": page["next_before"]}
        page = alice.get(f"/v1/sessions/{sid}/runs", params=older).json()
        assert [r["id"] for r in page["runs"]] == ids[-10:-5]
        oldest = {"limit": 5, "before": page["next_before"]}
        page = alice.get(f"/v1/sessions/{sid}/runs", params=oldest).json()
        assert [r["id"] for r in page["runs"]] == ids[:2] and page["next_before"] is None
    statements: list[str] = []
    engine = api.gw.store.engine
    listen = lambda *args: statements.append(args[2])  # noqa: E731
    event.listen(engine, "before_cursor_execute", listen)
    try:
        assert len(api.gw.store.ledger.runs_page(sid, limit=3)) == 3
    finally:
        event.remove(engine, "before_cursor_execute", listen)
    assert any("FROM heartbeat_runs" in s and "LIMIT" in s for s in statements), statements


def _insert_runs(api: Api, sid: str, count: int) -> list[int]:
    now = datetime.now(UTC)
    with Session(api.gw.store.engine) as db, db.begin():
        heartbeat_id = db.scalars(
            select(HeartbeatRow.id).where(HeartbeatRow.session_id == sid)
        ).one()
        rows = [
            RunRow(
                fire_id=f"{sid}:{i}",
                heartbeat_id=heartbeat_id,
                session_id=sid,
                generation=1,
                fence=i,
                state=RunState.COMPLETED,
                reserved_at=now,
                prev_anchor_at=now,
            )
            for i in range(count)
        ]
        db.add_all(rows)
        db.flush()
        return [r.id for r in rows]


@pytest.fixture
def strict_server(tmp_path: Path, redis_url: str, redis_ns: str) -> Iterator[tuple[str, int]]:
    """The API under its own server (``api_server``, as `hbgw api` runs it), 0.5 s deadlines."""
    overrides = {**api_overrides(), "api_read_timeout": 0.5, "api_keep_alive": 1}
    settings = gateway_settings(tmp_path, redis_url, redis_ns, **overrides)
    app = create_app(settings, redis_url=redis_url)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    server = api_server(app, "127.0.0.1", sock.getsockname()[1], log_level="warning")
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        wait_until(lambda: server.started or not thread.is_alive(), 30, "the server")
        yield "127.0.0.1", sock.getsockname()[1]
    finally:
        server.should_exit = True
        thread.join(30)
        sock.close()


def _answer_then_close(address: tuple[str, int], sent: bytes) -> bytes:
    """What the server answers to ``sent`` before it closes the connection (10 s at most)."""
    with socket.create_connection(address, timeout=10) as conn:
        conn.sendall(sent)
        received = b""
        while chunk := conn.recv(4096):  # a socket.timeout here: the server never closed it
            received += chunk
        return received


def test_a_client_too_slow_with_its_headers_is_cut_off(strict_server: tuple[str, int]) -> None:
    # A connection that sends nothing is closed; one that began a request is told why.
    assert _answer_then_close(strict_server, b"") == b""
    answer = _answer_then_close(strict_server, b"GET /healthz HTTP/1.1\r\nHost: x\r\n")
    assert answer.startswith(b"HTTP/1.1 408 "), answer


def test_a_client_too_slow_with_its_body_is_cut_off(strict_server: tuple[str, int]) -> None:
    head = b"POST /v1/sessions HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n"
    answer = _answer_then_close(strict_server, head + b"content-type: application/json\r\n\r\n{")
    assert answer.startswith(b"HTTP/1.1 408 "), answer
    assert b'"request_timeout"' in answer


def test_a_prompt_client_is_served_and_an_idle_one_let_go(strict_server: tuple[str, int]) -> None:
    answer = _answer_then_close(strict_server, b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
    assert answer.startswith(b"HTTP/1.1 200 ") and answer.endswith(b'{"status":"ok"}'), answer


def test_message_ids_tell_nothing_of_other_tenants_traffic(api: Api) -> None:
    with api.owner(ALICE) as alice, api.owner(BOB) as bob:
        mine, theirs = api.new_session(alice), api.new_session(bob)

        def post(who: httpx.Client, sid: str, text: str) -> int:
            answer = who.post(f"/v1/sessions/{sid}/messages", json={"text": text})
            assert answer.status_code == 202, answer.text
            shown: int = answer.json()["message_id"]
            return shown

        first = post(alice, mine, "one")
        for i in range(3):
            post(bob, theirs, f"b{i}")
        second = post(alice, mine, "two")
        stored = [m.id for m in api.gw.store.messages.list_messages(mine)]
        # SQL's sequence advanced by 4 between alice's two; the API's ids do not show it.
        assert stored[1] - stored[0] == 4
        assert {first, second}.isdisjoint(stored) and abs(second - first) > 1000
        page = alice.get(f"/v1/sessions/{mine}/messages", params={"limit": 1}).json()
        assert [m["id"] for m in page["messages"]] == [first] and page["next_after"] == first
        rest = alice.get(f"/v1/sessions/{mine}/messages", params={"after": first}).json()
        assert [m["id"] for m in rest["messages"]] == [second]
        stranger = alice.get(f"/v1/sessions/{mine}/messages", params={"after": 2**62 + 5})
        assert stranger.status_code == 422


def test_the_message_rate_holds_across_api_replicas(tight: Api) -> None:
    second = create_app(tight.gw.settings, celery_app=tight.gw.app, redis_url=tight.gw.redis_url)
    with serving(second) as url, tight.owner(ALICE) as alice:
        other = Api(url, tight.gw)
        sid = tight.new_session(alice)
        with other.owner(ALICE) as alice_there:
            for who in (alice, alice_there, alice):
                sent = who.post(f"/v1/sessions/{sid}/messages", json={"text": "hi"})
                assert sent.status_code == 202, sent.text
            _refused(
                alice_there.post(f"/v1/sessions/{sid}/messages", json={"text": "x"}), "rate_limited"
            )
