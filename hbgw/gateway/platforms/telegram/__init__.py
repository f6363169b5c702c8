"""Telegram: the webhook in (``routes.py``, checked by its secret token) or long polling
(``polling.py``), both mapped to sessions by ``updates.py`` and taken by ``inbound.py``;
``sendMessage`` out (``channel.py``); all on the documented Bot API over httpx (``api.py``
says why not python-telegram-bot). docs/platforms.md walks through the bot."""
