"""The SQL truth and the pure rules: models, migrations, the store, the heartbeat state machine,
the grammar and the lifecycle. The only package that imports SQLAlchemy.
"""
