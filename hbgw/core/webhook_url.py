"""The one check of a webhook URL that the settings, the API and the store share; without
pydantic, so the store's models (and a short command that reads them) do not import it."""

from __future__ import annotations

from urllib.parse import urlsplit

# A URL as kept on a session: long enough for a token in its path or query.
WEBHOOK_URL_CHARS = 2048


def webhook_url_problem(url: str) -> str | None:
    """None when ``url`` can be POSTed to; otherwise the sentence that says what to change."""
    if not url or len(url) > WEBHOOK_URL_CHARS:
        return f"A webhook URL must be 1 to {WEBHOOK_URL_CHARS} characters long."
    if any(c.isspace() or ord(c) < 32 for c in url):
        return "A webhook URL must not contain spaces or control characters."
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - a port out of range raises here
    except ValueError:
        return "The webhook URL is not a URL; use https://HOST/PATH."
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return "A webhook URL must be http:// or https:// with a host, like https://HOST/PATH."
    if parts.fragment:
        return "A webhook URL must not have a #fragment (it is never sent to the server)."
    return None


def check_webhook_url(url: str) -> str:
    """``url`` if it can be POSTed to; else ``ValueError`` with the sentence."""
    problem = webhook_url_problem(url)
    if problem is not None:
        raise ValueError(problem)
    return url
