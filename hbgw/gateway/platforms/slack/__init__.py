"""Slack: the Events API and the ``/hbgw`` slash command in (``routes.py``, verified by
``signature.py``, mapped to sessions by ``events.py``), ``chat.postMessage`` out (``channel.py``),
all through the official ``slack_sdk``. docs/platforms.md walks through the app."""
