"""Security findings of the HTTP API (issue 15), each through a real uvicorn on loopback."""

from __future__ import annotations

import random
import string
from pathlib import Path

import httpx
import pytest
from support.api_fixtures import ALICE, Api, api_overrides
from support.harness import gateway_settings
from support.http_server import serving

from gateway.api.app import create_app


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
