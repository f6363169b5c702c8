"""Process logs: one JSON object per record, or one key=value line when a person reads them.

Every record carries the same keys (ts, level, logger, message, action, session, fire_id,
worker), then any other ``extra=`` keys of the call site, then the exception text. Nothing
secret is written: URLs lose their passwords and secret query values, ``SecretStr`` values are
starred, and every configured secret (those inside URLs and the agent command included,
``core.masking``) is starred wherever it shows up in a record.
"""

from __future__ import annotations

import json
import logging
import re
import sys
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any, Literal, TextIO
from urllib.parse import unquote, urlsplit

from pydantic import SecretStr

from hbgw.core.masking import command_secrets, mask_url, url_secrets
from hbgw.core.settings import Settings

Mode = Literal["json", "text"]

STARS = "********"
FIELDS = ("action", "session", "fire_id", "worker")
# Attributes every LogRecord has; anything else on a record came from a call site's ``extra=``.
_STANDARD = set(vars(logging.LogRecord("", 0, "", 0, None, None, None))) | {
    "message",
    "asctime",
    "taskName",
}
QUIET_LOGGERS = ("httpx", "httpcore")
_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://\S+")
_BARE = re.compile(r"[^\s\"'=]+")
# What json.dumps(ensure_ascii=False) leaves raw and a terminal or a line reader obeys: C0 and
# C1 controls (ESC, NEL), the line and paragraph separators, the bidirectional overrides. Written
# as \uXXXX, which a JSON reader decodes back to the same text.
_LINE_BREAKING = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


class LogFormatter(logging.Formatter):
    def __init__(self, mode: Mode, *, secrets: Iterable[str] = (), worker: str | None = None):
        super().__init__()
        self.mode = mode
        self.worker = worker
        # Longest first, so a secret that contains another one is starred whole.
        self.secrets = sorted({s for s in secrets if s}, key=len, reverse=True)

    def format(self, record: logging.LogRecord) -> str:
        fields = self.fields(record)
        if self.mode == "json":
            line = json.dumps(fields, default=str, ensure_ascii=False)
        else:
            line = " ".join(f"{key}={_text_value(value)}" for key, value in fields.items())
        # A reply or a prompt in a record cannot break its line nor act on a terminal.
        return _LINE_BREAKING.sub(_json_escape, line)

    def fields(self, record: logging.LogRecord) -> dict[str, Any]:
        """The record as ordered, cleaned key/values (what both modes print)."""
        moment = datetime.fromtimestamp(record.created, UTC)
        out: dict[str, Any] = {
            "ts": moment.isoformat(timespec="milliseconds").replace("+00:00", "Z"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        out.update({name: getattr(record, name, None) for name in FIELDS})
        if out["worker"] is None:
            out["worker"] = self.worker
        out.update({k: v for k, v in vars(record).items() if k not in _STANDARD and k not in out})
        exc = self._exception_text(record)
        if exc:
            out["exc"] = exc
        return {key: self.clean(value) for key, value in out.items()}

    def clean(self, value: Any) -> Any:
        if isinstance(value, SecretStr):
            return STARS if value.get_secret_value() else ""
        if isinstance(value, str):
            return self.redact(value)
        if value is None or isinstance(value, bool | int | float):
            return value
        if isinstance(value, dict):
            return {str(k): self.clean(v) for k, v in value.items()}
        if isinstance(value, list | tuple | set | frozenset):
            return [self.clean(v) for v in value]
        return self.redact(str(value))

    def redact(self, text: str) -> str:
        text = _URL.sub(lambda m: mask_url(m.group(0)), text)
        for secret in self.secrets:
            text = text.replace(secret, STARS)
        return text

    def _exception_text(self, record: logging.LogRecord) -> str | None:
        parts = []
        if record.exc_info:
            parts.append(self.formatException(record.exc_info))
        if record.stack_info:
            parts.append(self.formatStack(record.stack_info))
        return "\n".join(parts) or None


def _json_escape(match: re.Match[str]) -> str:
    return f"\\u{ord(match.group()):04x}"


def _text_value(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, str) and _BARE.fullmatch(value):
        return value
    # Quoted and escaped, so a multi-line message or traceback stays on one line.
    return json.dumps(value, default=str, ensure_ascii=False)


def configured_secrets(settings: Settings) -> list[str]:
    """Every secret value the settings hold: SecretStr fields and passwords inside URLs."""
    secrets = []
    for name in type(settings).model_fields:
        value = getattr(settings, name)
        if isinstance(value, SecretStr):
            secrets.append(value.get_secret_value())
            if name == "api_tokens":
                # Each token alone is a secret too: a line may carry one without the others.
                pairs = value.get_secret_value().split(",")
                secrets.extend(pair.partition(":")[2].strip() for pair in pairs)
        elif name == "agent_command" and isinstance(value, str):
            secrets.extend(command_secrets(value))
        elif isinstance(value, str) and "://" in value:
            secrets.extend(url_secrets(value))
    if settings.alert_webhook:
        secrets.extend(webhook_secrets(settings.alert_webhook.get_secret_value()))
    if settings.webhook_url:  # the default URL of signed webhooks: its token may be its path
        secrets.extend(webhook_secrets(settings.webhook_url))
    return [s for s in secrets if s]


def webhook_secrets(url: str) -> list[str]:
    """The parts of a webhook URL that carry a token, as a client may print them after
    normalising it (a lower-cased host, a default port dropped): its path, query, password."""
    parts = urlsplit(url.strip())
    found = [url.strip(), parts.query, unquote(parts.query), parts.password or ""]
    if len(parts.path) > 1:  # "/" alone carries nothing and is in every URL
        found.extend({parts.path, unquote(parts.path)})
    return [s for s in found if s]


def choose_mode(setting: str, stream: TextIO) -> Mode:
    if setting == "auto":
        return "text" if stream.isatty() else "json"
    return "text" if setting == "text" else "json"


def configure_logging(
    settings: Settings, *, worker: str | None = None, stream: TextIO | None = None
) -> logging.Handler:
    """Send every log record of this process to ``stream`` (stderr), formatted per settings."""
    stream = stream or sys.stderr
    handler = logging.StreamHandler(stream)
    handler.setFormatter(
        LogFormatter(
            choose_mode(settings.log_format, stream),
            secrets=configured_secrets(settings),
            worker=worker,
        )
    )
    logging.basicConfig(level=settings.log_level, handlers=[handler], force=True)
    # The HTTP clients log every request with its full URL at INFO; a webhook's or a model
    # endpoint's URL may carry a token. Their warnings still come through.
    for name in QUIET_LOGGERS:
        logging.getLogger(name).setLevel(logging.WARNING)
    # With quorum queues on RabbitMQ, kombu warns at every worker start that ETA tasks on a
    # direct exchange block the worker; the gateway sends no ETA task (fires are due when sent).
    logging.getLogger("kombu.transport.native_delayed_delivery").setLevel(logging.ERROR)
    return handler
