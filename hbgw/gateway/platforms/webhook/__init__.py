"""Signed webhooks, for any other gateway: ``POST /platforms/webhook/messages`` in (``routes.py``,
verified by ``signature.py``, mapped to sessions by ``inbound.py``), a signed POST of every
reply to the session's URL out (``channel.py``, retried with tenacity), the session's URL set
through the API (``session_url.py``). docs/platforms.md, Signed webhooks, is the scheme."""
