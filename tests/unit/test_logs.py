"""Process logs: every record a JSON object (or one key=value line), never a secret."""

from __future__ import annotations

import io
import json
import logging
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from pydantic import SecretStr, ValidationError

from hbgw.core.logs import LogFormatter, Mode, configure_logging
from hbgw.core.settings import Settings

SECRETS = {
    "database_url": "postgresql://hb:s3cret-db@db:5432/hb",
    "redis_url": "redis://:r3dis-pw@cache:6379/0",
    "flower_password": "hunter2-flower",
}


class Captured:
    """A logger of its own, writing through one formatter into a string."""

    def __init__(self, formatter: logging.Formatter) -> None:
        self.stream = io.StringIO()
        handler = logging.StreamHandler(self.stream)
        handler.setFormatter(formatter)
        self.logger = logging.getLogger(f"hbgw.test.{uuid.uuid4().hex[:8]}")
        self.logger.propagate = False
        self.logger.setLevel(logging.DEBUG)
        self.logger.addHandler(handler)

    def lines(self) -> list[str]:
        return self.stream.getvalue().splitlines()

    def records(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.lines()]


def capture(mode: Mode, **kwargs: Any) -> Captured:
    return Captured(LogFormatter(mode, **kwargs))


@pytest.fixture
def root_logging() -> Iterator[logging.Logger]:
    """configure_logging replaces the root handlers: give pytest's back afterwards."""
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    yield root
    for handler in root.handlers:
        if handler not in handlers:
            handler.close()
    root.handlers[:] = handlers
    root.setLevel(level)


def test_json_record_keeps_the_call_sites_fields() -> None:
    log = capture("json", worker="w1")
    log.logger.info(
        "fire %s pending",
        "f1",
        extra={"action": "fire.pending", "fire_id": "f1", "session": "s1", "attempt": 2},
    )
    [record] = log.records()
    assert list(record)[:8] == [
        "ts",
        "level",
        "logger",
        "message",
        "action",
        "session",
        "fire_id",
        "worker",
    ]
    assert record["message"] == "fire f1 pending"
    assert (record["action"], record["session"], record["fire_id"]) == ("fire.pending", "s1", "f1")
    assert (record["worker"], record["attempt"], record["level"]) == ("w1", 2, "INFO")
    assert record["ts"].endswith("Z") and "exc" not in record


def test_record_without_extras_is_still_whole() -> None:
    log = capture("json")
    log.logger.warning("plain")
    [record] = log.records()
    assert record["message"] == "plain"
    assert record["action"] is record["session"] is record["fire_id"] is record["worker"] is None


def test_call_site_worker_wins_over_the_process_default() -> None:
    log = capture("json", worker="w1")
    log.logger.info("moved", extra={"worker": "w2"})
    assert log.records()[0]["worker"] == "w2"


def test_exception_text_is_kept() -> None:
    log = capture("json")
    try:
        1 / 0  # noqa: B018 - the point is the traceback
    except ZeroDivisionError:
        log.logger.exception("turn crashed", extra={"action": "turn.crashed"})
    [record] = log.records()
    assert "Traceback" in record["exc"] and "ZeroDivisionError" in record["exc"]


def test_text_mode_is_one_key_value_line_with_the_same_fields() -> None:
    log = capture("text", worker="w1")
    log.logger.info("fire pending", extra={"action": "fire.pending", "fire_id": "f1"})
    try:
        raise RuntimeError("two\nlines")
    except RuntimeError:
        log.logger.exception("crash")
    first, second = log.lines()  # the traceback stayed on its record's line
    assert first.startswith("ts=") and " level=INFO " in first
    for part in ('message="fire pending"', "action=fire.pending", "session=-", "fire_id=f1"):
        assert part in first
    assert first.endswith("worker=w1")
    assert "level=ERROR" in second and 'exc="Traceback' in second and "RuntimeError" in second


@pytest.mark.parametrize("mode", ["json", "text"])
def test_no_configured_secret_reaches_a_record(mode: Mode, root_logging: logging.Logger) -> None:
    stream = io.StringIO()
    configure_logging(Settings(log_format=mode, **SECRETS), stream=stream)  # type: ignore[arg-type]
    log = logging.getLogger("hbgw.test.secrets")
    log.info("connecting to %s", SECRETS["database_url"], extra={"url": SECRETS["redis_url"]})
    log.info("flower says %s", "hunter2-flower", extra={"nested": {"pw": ["r3dis-pw"]}})
    log.info("token", extra={"token": SecretStr("tok-123")})
    try:
        raise ValueError(f"bad password s3cret-db in {SECRETS['redis_url']}")
    except ValueError:
        log.exception("failed")
    text = stream.getvalue()
    for secret in ("s3cret-db", "r3dis-pw", "hunter2-flower", "tok-123"):
        assert secret not in text
    assert "postgresql://hb:********@db:5432/hb" in text
    assert "redis://:********@cache:6379/0" in text
    if mode == "json":
        records = [json.loads(line) for line in text.splitlines()]
        assert records[2]["token"] == "********"
        assert records[1]["message"] == "flower says ********"


def test_auto_is_text_on_a_terminal_and_json_otherwise(root_logging: logging.Logger) -> None:
    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    for stream, json_expected in ((io.StringIO(), True), (Terminal(), False)):
        handler = configure_logging(Settings(), stream=stream)
        assert isinstance(handler.formatter, LogFormatter)
        assert (handler.formatter.mode == "json") is json_expected


def test_level_comes_from_the_settings(root_logging: logging.Logger) -> None:
    stream = io.StringIO()
    configure_logging(Settings(log_level="warning", log_format="json"), stream=stream)
    log = logging.getLogger("hbgw.test.level")
    log.info("hidden")
    log.warning("shown")
    assert [json.loads(line)["message"] for line in stream.getvalue().splitlines()] == ["shown"]


def test_unknown_level_is_refused() -> None:
    with pytest.raises(ValidationError, match="not a log level"):
        Settings(log_level="chatty")
