"""The cost policies' words: ``budget 50k`` (tokens per UTC day) and ``model NAME`` (one of the
models the operator allows, HBGW_ALLOWED_MODELS). Pure: no I/O.

``budget`` takes whole tokens, with an optional ``k`` (thousand) or ``m`` (million): ``50k``,
``1.5m``, ``20000``; ``budget`` followed by anything else begins the prompt. ``model`` must be
followed by a model's name, like ``hours`` by a window (``model the data`` is refused: ``the``
is no allowed model).
"""

from __future__ import annotations

import re
from enum import StrEnum
from fractions import Fraction

from hbgw.core.errors import CommandError
from hbgw.sessions.grammar.text import quote

MAX_BUDGET = 10**12


class BudgetSource(StrEnum):
    """Where a heartbeat's budget comes from, first wins: its own ``budget`` word, its owner's
    default (``hbgw heartbeat budget``, ``/v1/owners/{owner}/budget``), the operator's
    (HBGW_HEARTBEAT_DAILY_TOKENS)."""

    HEARTBEAT = "heartbeat"
    OWNER = "owner"
    OPERATOR = "operator"


BUDGET = re.compile(r"([0-9]+(?:\.[0-9]+)?)([kKmM]?)")
_SCALE = {"": 1, "k": 1_000, "m": 1_000_000}
_NUMBER_CHARS = 32


def is_budget(value: str | None) -> bool:
    return value is not None and BUDGET.fullmatch(value) is not None


def parse_budget(value: str) -> int:
    """``50k`` as 50000 tokens; a fraction of a token or a budget out of range is refused."""
    match = BUDGET.fullmatch(value)
    if match is None:
        raise CommandError(f"{quote(value)} is not a token budget — write it like budget 50k.")
    number, unit = match.groups()
    # Exact (a float of 400 nines was infinity, and int() of it raised where a sentence
    # belongs), and read only at a length a budget can have (Python refuses int() of more
    # than 4,300 digits).
    tokens = Fraction(number) * _SCALE[unit.lower()] if len(number) <= _NUMBER_CHARS else 0
    if tokens.denominator != 1 or not 1 <= tokens <= MAX_BUDGET:
        raise CommandError(
            f"A token budget is a whole number of tokens from 1 to {MAX_BUDGET:,}, "
            f"not {quote(value)}."
        )
    return int(tokens)


def parse_default_budget(value: str) -> int | None:
    """An owner's default budget: tokens as for ``budget`` (``50k``), or ``off`` (None: none)."""
    word = value.strip()
    if word.lower() in ("off", "none"):
        return None
    if not is_budget(word):
        raise CommandError(
            f"{quote(word)} is not a default token budget — write tokens like 50k, or off to "
            "remove it."
        )
    return parse_budget(word)


def format_tokens(tokens: int) -> str:
    """50000 as ``50k``, 1500000 as ``1.5m``; anything else as written."""
    for unit, size in (("m", 1_000_000), ("k", 1_000)):
        if tokens >= size and (tokens * 10) % size == 0:
            whole, tenth = tokens // size, tokens % size * 10 // size
            return f"{whole}.{tenth}{unit}" if tenth else f"{whole}{unit}"
    return str(tokens)


def check_model(model: str, allowed: tuple[str, ...]) -> str:
    """The model, when the operator allows it; otherwise the sentence names the allowed ones."""
    if not model:
        raise CommandError("'model' needs the name of a model the gateway allows after it.")
    if model in allowed:
        return model
    if not allowed:
        raise CommandError(
            f"Model {quote(model)} is not allowed — this gateway allows no model choice "
            "(the operator lists models in HBGW_ALLOWED_MODELS); leave 'model' out."
        )
    names = ", ".join(allowed)
    raise CommandError(f"Model {quote(model)} is not allowed — the allowed models are: {names}.")
