"""Alembic environment: the engine comes from ``config.attributes`` (set by sessions.db)."""

from __future__ import annotations

from alembic import context

from hbgw.sessions.models import Base

config = context.config
engine = config.attributes["engine"]

with engine.connect() as connection:
    context.configure(
        connection=connection,
        target_metadata=Base.metadata,
        render_as_batch=connection.dialect.name == "sqlite",
    )
    with context.begin_transaction():
        context.run_migrations()
    connection.commit()
