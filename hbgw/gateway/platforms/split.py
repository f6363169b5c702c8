"""Long replies in parts a platform accepts, cut where a reader expects a break.

A part ends at the last paragraph break (blank line) within the limit, else the last line
break, else the last space, else at the limit itself. The break at a cut is dropped, and so is
blank text at the very end: the parts, joined by the breaks they were cut at, are the text.
"""

from __future__ import annotations

BREAKS = ("\n\n", "\n", " ")


def split_text(text: str, limit: int) -> list[str]:
    """``text`` in parts of at most ``limit`` characters, in order (one part if it fits)."""
    if limit < 1:
        raise ValueError("limit must be positive")
    parts: list[str] = []
    rest = text
    while len(rest) > limit:
        at, skip = _cut(rest, limit)
        parts.append(rest[:at])
        rest = rest[at + skip :]
    if rest.strip() or not parts:
        parts.append(rest)  # a text that ended on breaks leaves no blank last part
    return parts


def _cut(text: str, limit: int) -> tuple[int, int]:
    """Where to cut (the part's length) and how many break characters to drop there."""
    window = text[: limit + 1]  # a break right after the limit still ends a full part
    for mark in BREAKS:
        at = window.rfind(mark, 0, limit + 1)
        if 0 < at <= limit:
            return at, len(mark)
    return limit, 0
