"""The Redis boundary: fast state that can be rebuilt from SQL.

Key names, Lua scripts and their loader, the due index, per-session turn gate, ownership,
liveness, Celery task publishing, and the runtime that bundles them with the SQL store.
"""
