"""The chaos harness: real processes on loopback, faults on a schedule, checks from the ledger.

The top layer: it drives a whole deployment (its own Redis, a fresh PostgreSQL schema, two
beats, three workers) the way an operator's bad day would, then checks from SQL and the file
channel's record that nothing was lost, doubled or delivered stale. ``python -m chaos quick``.
"""
