"""A webhook URL as logs and answers may show it: its origin only.

A webhook's secret is as often in its path (``/services/T0/B0/XXXX``) as in its query or
userinfo, so nothing after the host is shown; ``…`` says something was left out.
"""

from __future__ import annotations

from urllib.parse import urlsplit


def origin(url: str) -> str:
    """``https://host:port/…`` of ``url`` (no userinfo, path, query or fragment)."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return "an unreadable URL"
    host = parts.hostname or "?"
    if ":" in host:
        host = f"[{host}]"  # an IPv6 address
    shown = f"{parts.scheme}://{host}" + (f":{port}" if port is not None else "")
    rest = parts.path not in ("", "/") or bool(parts.query)
    return shown + ("/…" if rest else "/")
