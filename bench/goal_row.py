"""One row of the goals table (bench/goals.py): the goal, what was measured, met or not."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Row:
    goal: str
    measured: str
    met: bool | None  # None: not measured in this run, or a figure reported, not a goal
