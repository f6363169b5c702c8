"""The HTTP API: sessions, messages, heartbeats, runs and events over FastAPI (``app.create_app``).

Modules: ``auth`` (bearer tokens, owners), ``errors`` (the JSON error shape and its codes),
``limits`` (request body size), ``schemas`` (request and response models), ``context`` (what a
request works with), ``routes_sessions``, ``routes_messages``, ``routes_heartbeat``, ``events``
(server-sent events), ``health`` and ``metrics``.
"""
