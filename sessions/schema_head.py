"""The head revision the migration files name, read without Alembic: the store
(``db.ensure_schema``) trusts a database that says it is at this head, and leaves anything else
to Alembic, so a command imports Alembic only to migrate."""

from __future__ import annotations

import re
from pathlib import Path

MIGRATIONS = Path(__file__).with_name("migrations")
# `revision = "0014"`, `down_revision = "0013"` (or None): a plain one, not a merge's tuple.
_REVISION_LINE = re.compile(r'^(down_revision|revision)\s*(?::[^=]*)?=\s*(None|"[^"]*")\s*$', re.M)


def file_head() -> str | None:
    """The head revision as the migration files name it, without Alembic; None unless every
    file names a plain revision and exactly one is nobody's ``down_revision``."""
    revisions: set[str] = set()
    parents: set[str] = set()
    for path in (MIGRATIONS / "versions").glob("*.py"):
        found = {m.group(1): m.group(2) for m in _REVISION_LINE.finditer(path.read_text())}
        if "revision" not in found or "down_revision" not in found:
            return None  # a merge (a tuple), or a file written otherwise: Alembic decides
        revisions.add(found["revision"].strip('"'))
        if found["down_revision"] != "None":
            parents.add(found["down_revision"].strip('"'))
    heads = revisions - parents
    return heads.pop() if len(heads) == 1 else None
