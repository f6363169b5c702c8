"""Chat platforms at the edge: one package per platform (``slack/``, ``telegram/``,
``discord/``, ``webhook/`` for signed webhooks), each with its inbound routes (verified before
anything is read or stored) and its channel (the official client, or the documented API where
none fits), plus what they share: which platforms a deployment serves (``served.py``),
splitting long replies (``split.py``), and the inbound guard (``guard.py``: reject metrics,
event de-duplication)."""
