"""Issue 29, low findings: what a platform route does with a body or a header no platform sends.

* ``X-Slack-Request-Timestamp: ²``: ``"²".isdigit()`` is true and ``int("²")`` raised — a 500
  and two tracebacks without authentication; now 401 like any bad signature (the other
  platforms' ``isascii()`` check).
* A signed body of thousands of nested ``[``: ``json.loads`` raised ``RecursionError`` — a 500
  on all four platform routes; now the route's answer to a malformed body, with no traceback.
"""

from __future__ import annotations

import pytest
from support.discord_fixtures import Discord
from support.fake_slack import slack_headers
from support.slack_fixtures import SECRET, Slack
from support.telegram_fixtures import Telegram
from support.webhook_fixtures import Webhook

NESTED = b"[" * 4000  # deeper than the parser goes, within the fixtures' 4096-byte body limit


def no_tracebacks(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.exc_info]


def test_a_slack_timestamp_of_unicode_digits_is_a_bad_signature(
    slack: Slack, caplog: pytest.LogCaptureFixture
) -> None:
    body = b'{"type": "event_callback"}'
    headers = slack_headers(SECRET, body, 1700000000)
    headers["X-Slack-Request-Timestamp"] = "\xb2"
    with slack.client() as client:
        answer = client.post(
            "/platforms/slack/events",
            content=body,
            headers={k.encode(): v.encode("latin-1") for k, v in headers.items()},
        )
    assert answer.status_code == 401, answer.text
    assert "valid Slack signature" in answer.json()["error"]["message"]
    assert no_tracebacks(caplog) == []


def test_a_deeply_nested_slack_body_is_malformed(
    slack: Slack, caplog: pytest.LogCaptureFixture
) -> None:
    answer = slack.post("/platforms/slack/events", NESTED)
    assert answer.status_code == 400, answer.text
    assert no_tracebacks(caplog) == []


def test_a_deeply_nested_discord_body_is_malformed(
    discord: Discord, caplog: pytest.LogCaptureFixture
) -> None:
    answer = discord.post(NESTED)
    assert answer.status_code == 400, answer.text
    assert no_tracebacks(caplog) == []


def test_a_deeply_nested_telegram_body_is_malformed(
    telegram: Telegram, caplog: pytest.LogCaptureFixture
) -> None:
    answer = telegram.post(NESTED)
    assert answer.status_code == 400, answer.text
    assert no_tracebacks(caplog) == []


def test_a_deeply_nested_webhook_body_is_malformed(
    webhook: Webhook, caplog: pytest.LogCaptureFixture
) -> None:
    answer = webhook.post(NESTED)
    assert answer.status_code == 422, answer.text  # the webhook's answer to any malformed body
    assert answer.json()["error"]["message"] == (
        "Not a webhook message: the body nests too deeply to be read as JSON."
    )
    assert no_tracebacks(caplog) == []
