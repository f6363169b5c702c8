"""Discord over HTTP interactions: ``POST /platforms/discord/interactions`` in (``routes.py``,
verified by ``signature.py`` with Ed25519, mapped to sessions by ``interactions.py``, applied by
``inbound.py``), the REST API out (``channel.py`` on ``rest.py`` and ``ratelimits.py``), the
application commands registered by ``commands.py`` (``hbgw discord register-commands``).
docs/platforms.md walks through the application."""
