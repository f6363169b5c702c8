"""`/readyz` follows Redis and the schema; the API rides out Redis going away."""

from __future__ import annotations

from pathlib import Path

from support.api_fixtures import ALICE, Api, api_overrides
from support.harness import Gateway, gateway_settings
from support.http_server import serving
from support.private_redis import PrivateRedis

from hbgw.gateway.api.app import create_app
from hbgw.sessions.db import downgrade, make_engine


def test_readyz_fails_while_redis_is_down_and_messages_are_still_accepted(
    tmp_path: Path, private_redis: PrivateRedis
) -> None:
    private_redis.start()
    settings = gateway_settings(tmp_path, private_redis.url, "ready", **api_overrides())
    gw = Gateway(settings, private_redis.url)
    try:
        with serving(create_app(settings, celery_app=gw.app, redis_url=private_redis.url)) as url:
            api = Api(url, gw)
            with api.admin() as anyone, api.owner(ALICE) as alice:
                assert anyone.get("/readyz").status_code == 200
                sid = api.new_session(alice)
                private_redis.stop()
                down = anyone.get("/readyz")
                assert down.status_code == 503
                body = down.json()
                assert body["status"] == "not_ready"
                assert body["checks"]["database"] == "ok" and body["checks"]["schema"] == "ok"
                assert body["checks"]["redis"].startswith("Redis does not answer")
                # SQL is the truth: the message is stored, handed to Redis later.
                sent = alice.post(f"/v1/sessions/{sid}/messages", json={"text": "hello"})
                assert sent.status_code == 202 and sent.json()["handed_off"] is False
                command = alice.post(
                    f"/v1/sessions/{sid}/messages", json={"text": "/heartbeat 5m check"}
                )
                assert command.status_code == 200 and command.json()["ok"] is True
                status = alice.get(f"/v1/sessions/{sid}/heartbeat").json()
                assert status["status"] == "active" and status["emergency_stop"] is None
                private_redis.start()
                assert anyone.get("/readyz").status_code == 200
    finally:
        gw.close()


def test_readyz_names_a_schema_behind(tmp_path: Path, redis_url: str, redis_ns: str) -> None:
    settings = gateway_settings(tmp_path, redis_url, redis_ns, **api_overrides())
    app = create_app(settings, redis_url=redis_url)
    engine = make_engine(settings.effective_database_url)
    downgrade(engine, "0001")
    engine.dispose()
    with serving(app) as url, Api(url, None).admin() as admin:  # type: ignore[arg-type]
        answer = admin.get("/readyz")
    assert answer.status_code == 503
    assert "hbgw migrate" in answer.json()["checks"]["schema"]
