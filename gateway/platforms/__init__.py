"""Chat platforms at the edge: one package per platform (``slack/``, ``webhook/``; Telegram and
Discord to come), each with its inbound routes (verified before anything is read or stored) and
its channel (the official client), plus what they share: which platforms a deployment serves
(``served.py``), splitting long replies (``split.py``), and the inbound guard (``guard.py``:
reject metrics, event de-duplication)."""
