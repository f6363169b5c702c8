"""Wording shared by the error messages of every grammar in this package."""

from __future__ import annotations


def quote(text: str, limit: int = 40) -> str:
    """``text`` in quotes for an error message, shortened so a long prompt cannot flood it."""
    text = " ".join(text.split())
    return f"'{text}'" if len(text) <= limit else f"'{text[: limit - 1]}…'"
