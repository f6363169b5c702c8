"""Wording shared by the error messages of every grammar in this package."""

from __future__ import annotations


def quote(text: str, limit: int = 40) -> str:
    """``text`` in quotes for an error message, shortened so a long prompt cannot flood it."""
    text = " ".join(text.split())
    return f"'{text}'" if len(text) <= limit else f"'{text[: limit - 1]}…'"


def edit_distance(a: str, b: str) -> int:
    """Insertions, deletions, substitutions and swaps of neighbours that turn ``a`` into ``b``."""
    previous: list[int] = []
    row = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        before, previous, row = previous, row, [i] + [0] * len(b)
        for j, cb in enumerate(b, 1):
            row[j] = min(previous[j] + 1, row[j - 1] + 1, previous[j - 1] + (ca != cb))
            if i > 1 and j > 1 and ca == b[j - 2] and a[i - 2] == cb:
                row[j] = min(row[j], before[j - 2] + 1)  # "stauts": one swap from "status"
    return row[-1]
