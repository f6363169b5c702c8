"""The `hbgw` command as a new user meets it: sentences for errors, exit codes 0/2/1."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import redis
from support.cli_fixtures import Hbgw


def test_session_and_heartbeat_walkthrough(hbgw: Hbgw) -> None:
    created = hbgw("session", "create", "--platform", "slack", "--chat", "C1", "--thread", "T9")
    assert created.code == 0
    sid = created.out.strip()
    assert sid and "\n" not in sid

    reply = hbgw("send", sid, "/heartbeat every 90 minutes check CI")
    assert reply.out.strip() == "♥ Heartbeat set (every 90m): check CI"

    status = json.loads(hbgw("heartbeat", "status", sid, "--json").out)
    assert status["status"] == "active"
    assert status["interval_seconds"] == 5400
    assert status["fire_count"] == 0
    assert status["next_due_at"].endswith("Z")
    assert status["cron"] is None and status["timezone"] is None
    assert {"session_id", "prompt", "generation", "last_outcome"} <= status.keys()

    assert "/heartbeat every 10m" in hbgw("send", sid, "/heartbeat help").out
    line = hbgw("send", sid, "/hb").out
    assert line.startswith("♥ Heartbeat (every 90m): check CI — next at ")

    added = hbgw("send", sid, "/cron add every 2h -- check the deploy").out
    assert added.startswith("⏰ Cron job j") and "every 2h" in added
    job = json.loads(hbgw("cron", "list", "--json").out)[0]
    assert (job["platform"], job["chat"], job["thread"]) == ("slack", "C1", "T9")
    assert job["id"] in hbgw("send", sid, "/cron list").out

    assert hbgw("heartbeat", "pause", sid).out.startswith("♥ Heartbeat paused")
    assert json.loads(hbgw("heartbeat", "status", sid, "--json").out)["status"] == "paused"
    assert hbgw("heartbeat", "resume", sid).out.startswith("♥ Heartbeat resumed")
    assert hbgw("heartbeat", "clear", sid).code == 0
    assert json.loads(hbgw("heartbeat", "status", sid, "--json").out)["status"] == "none"

    cron = hbgw("heartbeat", "set", sid, "--cron", "0 9 * * 1-5", "--tz", "Asia/Tokyo", "stand-up")
    assert cron.code == 0, cron.err
    status = json.loads(hbgw("heartbeat", "status", sid, "--json").out)
    assert (status["cron"], status["timezone"]) == ("0 9 * * 1-5", "Asia/Tokyo")

    child = hbgw("session", "compress", sid).out.strip()
    assert json.loads(hbgw("heartbeat", "status", child, "--json").out)["status"] == "active"
    shown = hbgw("session", "show", sid).out
    assert "closed (compressed)" in shown
    assert hbgw("runs", child).out.startswith("No runs (heartbeat or cron job)")
    assert json.loads(hbgw("runs", child, "--json").out) == []


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (("send", "SID", "/heartbeat every 10s check"), "Interval too small — minimum is 60s."),
        (("send", "SID", "/heartbeat every 10m"), "The prompt is required"),
        (("send", "SID", "/heartbeat cron 61 * * * * x"), "minute field"),
        (("send", "SID", "/cron add 1-2-3 * * * * -- x"), "minute"),
        (("send", "SID", "/cron pause j00000000000"), "no cron job j00000000000 in this chat"),
        (("heartbeat", "set", "SID", "--every", "banana", "x"), "is not an interval"),
        (("heartbeat", "set", "SID", "--cron", "*/0 * * * *", "x"), "step must be at least 1"),
        (("heartbeat", "pause", "SID"), "no heartbeat to pause"),
        (("heartbeat", "status", "nope"), "There is no session 'nope'"),
    ],
)
def test_bad_input_is_a_sentence_and_exit_2(hbgw: Hbgw, args: tuple[str, ...], needle: str) -> None:
    sid = hbgw("session", "create", "--platform", "cli", "--chat", "me").out.strip()
    result = hbgw(*(sid if a == "SID" else a for a in args))
    assert result.code == 2
    assert needle in result.err
    assert "Traceback" not in result.err
    assert result.err.startswith("Error: ")


def test_usage_error_exits_2(hbgw: Hbgw) -> None:
    assert hbgw("session", "create").code == 2  # --platform and --chat are required


def test_send_plain_text_without_redis_queues(hbgw: Hbgw, monkeypatch: pytest.MonkeyPatch) -> None:
    sid = hbgw("session", "create", "--platform", "cli", "--chat", "me").out.strip()
    result = hbgw("send", sid, "hello", "there")
    assert result.code == 0
    assert "queued" in result.out and "no Redis reachable" in result.out


def test_config_masks_secrets(hbgw: Hbgw, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HBGW_DATABASE_URL", "postgresql://hb:s3cret@db:5432/hb")
    monkeypatch.setenv("HBGW_FLOWER_PASSWORD", "hunter2")
    text = hbgw("config").out
    assert "s3cret" not in text and "hunter2" not in text
    assert "HBGW_DATABASE_URL=postgresql://hb:********@db:5432/hb" in text
    assert "HBGW_MIN_INTERVAL=60.0" in text


def test_migrate_reports_revision(hbgw: Hbgw) -> None:
    result = hbgw("migrate")
    assert result.code == 0 and "Database schema at 0018" in result.out


@pytest.mark.parametrize(
    "url", ["mysql://hb@db/hb", "postgres://hb@db/hb", "postgresql+psycopg2://hb@db/hb", "hb.db"]
)
def test_an_unsupported_database_url_is_one_sentence(
    hbgw: Hbgw, monkeypatch: pytest.MonkeyPatch, url: str
) -> None:
    monkeypatch.setenv("HBGW_DATABASE_URL", url)
    result = hbgw("session", "create", "--platform", "p", "--chat", "c")
    assert result.code == 2, result
    assert result.err.count("\n") == 1 and "Error" in result.err
    assert result.err.startswith("Error: HBGW_DATABASE_URL is not valid: ")
    assert "sqlite:///" in result.err and "postgresql://" in result.err
    assert "Value error" not in result.err


@pytest.mark.parametrize(
    "url", ["sqlite:///{home}/x.db", "sqlite+pysqlite:///{home}/x.db", "postgresql+psycopg://h/db"]
)
def test_supported_database_urls_are_accepted(
    hbgw: Hbgw, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, url: str
) -> None:
    monkeypatch.setenv("HBGW_DATABASE_URL", url.format(home=tmp_path))
    assert hbgw("config").code == 0


def test_unexpected_failure_exits_1(hbgw: Hbgw, monkeypatch: pytest.MonkeyPatch) -> None:
    # A SQLite file under /dev/null: its directory cannot be made — not a user's typo.
    monkeypatch.setenv("HBGW_DATABASE_URL", "sqlite:////dev/null/hbgw.sqlite3")
    result = hbgw("session", "create", "--platform", "p", "--chat", "c")
    assert result.code == 1
    assert result.err.startswith("Unexpected failure:")


def test_estop_switches_the_flag(
    hbgw: Hbgw,
    monkeypatch: pytest.MonkeyPatch,
    redis_url: str,
    redis_ns: str,
    redis_client: redis.Redis,
) -> None:
    monkeypatch.setenv("HBGW_REDIS_URL", redis_url)
    monkeypatch.setenv("HBGW_NAMESPACE", redis_ns)
    from hbgw.state.keys import Keys

    keys = Keys(redis_ns)
    s1 = hbgw("session", "create", "--platform", "cli", "--chat", "me").out.strip()
    assert (
        hbgw("estop", "on", "--session", s1).out.strip() == f"Emergency stop on for session {s1}."
    )
    assert redis_client.exists(keys.estop(s1))
    assert hbgw("estop", "on").code == 0
    assert redis_client.exists(keys.estop())
    hbgw("estop", "off")
    hbgw("estop", "off", "--session", s1)
    assert not redis_client.exists(keys.estop()) and not redis_client.exists(keys.estop(s1))
    assert hbgw("estop", "maybe").code == 2


def test_runs_of_an_unknown_session_is_bad_input(hbgw: Hbgw) -> None:
    for args in (("runs", "nope"), ("runs", "nope", "--json")):
        result = hbgw(*args)
        assert result.code == 2, result
        assert result.err.startswith("Error: There is no session 'nope'"), result.err
        assert result.err.count("\n") == 1


def test_estop_of_an_unknown_session_is_bad_input(
    hbgw: Hbgw, monkeypatch: pytest.MonkeyPatch, redis_url: str, redis_ns: str
) -> None:
    monkeypatch.setenv("HBGW_REDIS_URL", redis_url)
    monkeypatch.setenv("HBGW_NAMESPACE", redis_ns)
    for switch in ("on", "off"):
        result = hbgw("estop", switch, "--session", "nope")
        assert result.code == 2, result
        assert result.err.startswith("Error: There is no session 'nope'"), result.err
        assert result.err.count("\n") == 1
