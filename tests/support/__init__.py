"""What the tests share: the gateway harness, seed data, scenarios and the fixture plugins.

Test modules import helpers from here and never from one another; fixtures come from the
plugins listed in ``tests/conftest.py``.
"""
