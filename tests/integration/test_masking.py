"""Issue 15, hole 7: secrets inside a URL's query string or the agent command are starred in
`hbgw config` and in logs, by one rule: a value is secret when its name says so
(``core.masking``)."""

from __future__ import annotations

import io
import logging
from collections.abc import Iterator

import pytest
from support.cli_fixtures import Hbgw

from hbgw.core.logs import configure_logging
from hbgw.core.masking import mask_command, mask_url
from hbgw.core.settings import Settings

WEBHOOK_TOKEN = "whk-7f3a"
AGENT_TOKEN = "agt-91bc"
AGENT_KEY = "sk-live-42"
AGENT_COMMAND = f"my-agent --token {AGENT_TOKEN} --model small OPENAI_API_KEY={AGENT_KEY}"
DATABASE = "postgresql://hb@db:5432/hb?sslmode=require&password=q-pass-1"


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("redis://:pw@cache:6379/0", "redis://:********@cache:6379/0"),
        (DATABASE, "postgresql://hb@db:5432/hb?sslmode=require&password=********"),
        (
            "https://h/x?access_token=a&Signature=b&page=2#top",
            "https://h/x?access_token=********&Signature=********&page=2#top",
        ),
        ("rediss://h:6380?ssl_cert_reqs=required", "rediss://h:6380?ssl_cert_reqs=required"),
        ("sqlite:////srv/hb.sqlite3", "sqlite:////srv/hb.sqlite3"),
    ],
)
def test_a_url_loses_its_password_and_its_secret_query_values(url: str, shown: str) -> None:
    assert mask_url(url) == shown


def test_an_agent_command_loses_its_secret_options_and_assignments() -> None:
    shown = mask_command(f"{AGENT_COMMAND} --api-key=abc https://m/v1?key=zz")
    assert shown == (
        "my-agent --token ******** --model small OPENAI_API_KEY=******** "
        "--api-key=******** 'https://m/v1?key=********'"
    )


def test_config_masks_secrets_in_query_strings_and_the_agent_command(
    hbgw: Hbgw, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HBGW_DATABASE_URL", DATABASE)
    monkeypatch.setenv("HBGW_AGENT_COMMAND", AGENT_COMMAND)
    text = hbgw("config").out
    for secret in ("q-pass-1", AGENT_TOKEN, AGENT_KEY):
        assert secret not in text
    assert "--token ******** --model small" in text


@pytest.fixture
def root_logging() -> Iterator[None]:
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)


def test_logs_star_the_agent_command_and_query_secrets(root_logging: None) -> None:
    stream = io.StringIO()
    configure_logging(
        Settings(log_format="json", agent_command=AGENT_COMMAND, database_url=DATABASE),
        stream=stream,
    )
    log = logging.getLogger("hbgw.test.masking")
    log.info("agent %s failed", AGENT_COMMAND.split())
    log.info("agent key %s in use", AGENT_KEY)
    log.info("posting to https://hooks.example/x?token=%s", WEBHOOK_TOKEN)
    text = stream.getvalue()
    for secret in (AGENT_TOKEN, AGENT_KEY, WEBHOOK_TOKEN, "q-pass-1"):
        assert secret not in text
