"""A py-spy collapsed profile by library and by turn step: ``python -m bench.profile_groups F``.

Self samples (the frame running when sampled) go to the library of that frame's file: SQLAlchemy,
psycopg, redis-py, Celery/kombu, JSON, logging, our code (``hbgw/``), threads and queues
(``threading``, ``concurrent``, ``queue``), the rest of the standard library. Steps are inclusive: a
stack that passes through a step's frame counts for it (the steps nest in none of each other).
"""

from __future__ import annotations

import re
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

LIBRARIES = (
    ("sqlalchemy", ("sqlalchemy/", "sqlalchemy.")),
    ("psycopg", ("psycopg",)),
    ("redis-py", ("redis/", "hiredis")),
    ("Celery/kombu", ("celery/", "kombu/", "billiard/", "vine/", "amqp/")),
    ("JSON", ("json/", "orjson")),
    ("logging", ("logging/", "structlog")),
    ("ours (hbgw)", ("hbgw/",)),
    ("threads and queues", ("threading.py", "concurrent/", "queue.py")),
)
STEPS = (
    ("begin: claim, reservation, re-check, start (SQL)", "HeartbeatTurn.begin "),
    ("mark delivering (SQL)", "HeartbeatTurn.mark "),
    ("finish: reply, delivery record, heartbeat (SQL)", "HeartbeatTurn.finish "),
    ("the turn gate's Redis round trips", "TurnGate."),
    ("admission (a task's batch)", "_admissions_in "),
    ("Celery consumer and task handling", "celery/worker/"),
    ("lock renewals", "LockRenewals."),
)
_FILE = re.compile(r"\(([^()]*)\)$")


def library(frame: str) -> str:
    found = _FILE.search(frame)
    path = found.group(1) if found else frame
    for name, marks in LIBRARIES:
        if any(mark in path for mark in marks):
            return name
    return "other (standard library, generated code)"


def stacks(collapsed: Path) -> Iterator[tuple[str, int]]:
    """py-spy's collapsed output: each stack (frames joined by ``;``) and its sample count."""
    for line in collapsed.read_text().splitlines():
        stack, _, n = line.rpartition(" ")
        if n.isdigit():
            yield stack, int(n)


def groups(collapsed: Path) -> tuple[int, Counter[str], Counter[str]]:
    """Total samples, self samples by library, inclusive samples by step."""
    by_library: Counter[str] = Counter()
    by_step: Counter[str] = Counter()
    total = 0
    for stack, samples in stacks(collapsed):
        total += samples
        by_library[library(stack.split(";")[-1])] += samples
        for name, mark in STEPS:
            if mark in stack:
                by_step[name] += samples
    return total, by_library, by_step


def report(collapsed: Path) -> str:
    total, by_library, by_step = groups(collapsed)
    if not total:
        return f"{collapsed}: no samples"
    lines = [f"{collapsed.name}: {total} samples", "self, by library:"]
    lines += [f"  {100 * n / total:5.1f}%  {name}" for name, n in by_library.most_common()]
    lines.append("inclusive, by step of a turn:")
    lines += [f"  {100 * n / total:5.1f}%  {name}" for name, n in by_step.most_common()]
    return "\n".join(lines)


if __name__ == "__main__":
    for arg in sys.argv[1:]:
        print(report(Path(arg)))
