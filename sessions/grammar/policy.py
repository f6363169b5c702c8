"""Heartbeat policies: the words after the schedule that shape when it fires and when it ends.

``hours 09:00-18:00 [Area/City]`` (active hours; the zone defaults to ``--tz``, else UTC),
``weekdays`` (only windows starting Monday to Friday; alone: whole weekdays), ``exact`` (no
jitter), ``for 7d`` or ``for 7 days`` (ends that long after it is set), ``times N`` (ends
after N fires), ``dedupe 6h`` (a reply identical to the last one delivered on its route within
that window is not sent; ``dedupe 0``: off; unsaid: the operator's HBGW_DEDUPE) and
``backoff 4h`` (quiet fires double the interval up to that ceiling); ``budget 50k`` and
``model NAME`` (``grammar.costs``).

They follow the schedule, in any order, each at most once. ``for`` and ``times`` are policy words
only when a duration or a whole number follows (``every 1h for the release …`` is a prompt);
``hours`` must be followed by a window.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import time
from typing import Protocol

from hbgw.core.errors import CommandError
from hbgw.sessions.grammar.costs import (
    BudgetSource,
    check_model,
    format_tokens,
    is_budget,
    parse_budget,
)
from hbgw.sessions.grammar.cron import parse_timezone
from hbgw.sessions.grammar.hours import ActiveHours
from hbgw.sessions.grammar.intervals import format_interval, parse_interval, unit_seconds
from hbgw.sessions.grammar.limits import GrammarLimits
from hbgw.sessions.grammar.text import quote

MAX_TIMES = 1_000_000
DEFAULT_DEDUPE = 86400
SILENT = (0, DEFAULT_DEDUPE)  # dedupe windows describe() leaves out
_WORDS = {
    "hours": 1,
    "for": 2,
    "times": 1,
    "dedupe": 2,
    "backoff": 2,
    "budget": 1,
    "model": 1,
}  # word: values to read
_DURATIONS = ("for", "dedupe", "backoff")
_ZERO = re.compile(r"0+(?:\.0+)?\s*[A-Za-z]*")
_WINDOW = re.compile(r"([01]?[0-9]|2[0-3]):([0-5][0-9])-([01]?[0-9]|2[0-3]):([0-5][0-9])")
_ZONE = re.compile(r"UTC|[A-Za-z][A-Za-z0-9_+-]*(?:/[A-Za-z0-9_+-]+)+")
_NUMBER = re.compile(r"[0-9]+(?:\.[0-9]+)?")
_DURATION = re.compile(r"[0-9]+(?:\.[0-9]+)?\s*[A-Za-z]+")
_WHOLE = re.compile(r"[0-9]+")
_TOKEN = re.compile(r"\S+")
WINDOW_EXAMPLE = "hours 09:00-18:00 Europe/Paris"


@dataclass(frozen=True)
class Policy:
    hours: ActiveHours | None = None
    exact: bool = False
    lasts: int | None = None
    """Seconds from the set time to the end (``for 7d``)."""
    times: int | None = None
    stagger: bool = True
    """Jittered unless ``exact`` (HBGW_JITTER=false: never); not shown, not a user's word."""
    budget: int | None = None
    """Tokens per UTC day (``budget 50k``, else the owner's default, else
    HBGW_HEARTBEAT_DAILY_TOKENS when set)."""
    budget_from: BudgetSource | None = None
    """Where ``budget`` came from; None with no budget."""
    model: str | None = None
    dedupe: int = 0
    """Seconds an identical reply on the same route is not sent again (0: off)."""
    backoff: int | None = None
    """The ceiling, in seconds, that quiet fires double an interval up to (None: no backoff)."""

    def describe(self) -> str:
        parts = [f"hours {self.hours.describe()}"] if self.hours else []
        parts += ["exact"] if self.exact else []
        parts += [f"for {format_interval(self.lasts)}"] if self.lasts else []
        parts += [f"times {self.times}"] if self.times else []
        parts += [f"budget {format_tokens(self.budget)}{self._default()}"] if self.budget else []
        parts += [f"model {self.model}"] if self.model else []
        # The usual window goes unsaid (status shows it); another one is said.
        parts += [f"dedupe {format_interval(self.dedupe)}"] if self.dedupe not in SILENT else []
        parts += [f"backoff {format_interval(self.backoff)}"] if self.backoff else []
        return " ".join(parts)

    @property
    def names_budget(self) -> bool:
        """Its budget is its own: the ``budget`` word (a Policy built in code counts too)."""
        return self.budget is not None and self.budget_from in (None, BudgetSource.HEARTBEAT)

    def _default(self) -> str:
        """`` by owner default``: a budget the heartbeat did not name says whose it is."""
        if self.budget_from in (BudgetSource.OWNER, BudgetSource.OPERATOR):
            return f" by {self.budget_from} default"
        return ""


NO_POLICY = Policy()


class Cursor(Protocol):
    pos: int

    def _peek(self) -> str | None: ...
    def _skip(self, token: str) -> None: ...


class Words:
    """A cursor over policy text alone (the CLI's and the API's options)."""

    def __init__(self, text: str) -> None:
        self.text, self.pos = text, 0

    def _peek(self) -> str | None:
        match = _TOKEN.search(self.text, self.pos)
        return match.group() if match else None

    def _skip(self, token: str) -> None:
        self.pos = self.text.index(token, self.pos) + len(token)


def parse_policy(text: str, *, tz: str | None, limits: GrammarLimits) -> Policy:
    """Policy words only, as the CLI and the API give them; anything else is an error."""
    words, draft = Words(text), PolicyDraft()
    while draft.step(words, limits.min_interval):
        pass
    left = words._peek()
    if left is not None:
        raise CommandError(
            f"{quote(left)} is not a heartbeat policy — --for, --dedupe and --backoff take a "
            "duration like 7d (--dedupe also 0), --times a whole number, --budget tokens like "
            "50k and --model a model's name."
        )
    return draft.policy(tz, limits)


@dataclass
class PolicyDraft:
    """What the policy words said so far; ``zone`` is the hours' own zone, if given."""

    window: tuple[time, time] | None = None
    zone: str | None = None
    weekdays: bool = False
    exact: bool = False
    lasts: int | None = None
    times: int | None = None
    budget: int | None = None
    model: str | None = None
    seen: set[str] | None = None
    dedupe: int | None = None
    backoff: int | None = None

    def step(self, cursor: Cursor, minimum: float) -> bool:
        """Consume one policy word (and its value) at the cursor; False: the prompt starts."""
        token = cursor._peek()
        word = (token or "").lower()
        if word not in ("hours", "weekdays", "exact", *_WORDS):
            return False
        assert token is not None
        values = _values_after(cursor, token, _WORDS.get(word, 0))
        value = values[0] if values else None
        if word in _DURATIONS and _spaced_duration(values):
            value = " ".join(values)  # "for 7 days"
        if word in _WORDS and word not in ("hours", "model") and not _fits(word, value):
            return False  # "for the release": the prompt starts here
        self._once(word)
        cursor._skip(token)
        for part in (value or "").split():
            cursor._skip(part)
        if word == "hours":
            self._hours(cursor, value)
        elif word == "for":
            assert value is not None
            self.lasts = parse_interval(value, minimum=minimum)
        elif word == "times":
            self.times = _times(value)
        elif word in ("budget", "model"):
            self._cost(word, value or "")
        elif word in ("dedupe", "backoff"):
            assert value is not None
            zero = word == "dedupe" and _ZERO.fullmatch(value) is not None
            setattr(self, word, 0 if zero else parse_interval(value, minimum=1))
        else:
            setattr(self, word, True)
        return True

    def _cost(self, word: str, value: str) -> None:
        if word == "budget":
            self.budget = parse_budget(value)
        else:
            self.model = value

    def _once(self, word: str) -> None:
        self.seen = self.seen or set()
        if word in self.seen:
            raise CommandError(f"'{word}' is given twice — give each policy once.")
        self.seen.add(word)

    def _hours(self, cursor: Cursor, value: str | None) -> None:
        match = _WINDOW.fullmatch(value or "")
        if match is None:
            shown = f"{quote(value)} is not a window" if value else "'hours' needs a window"
            raise CommandError(
                f"{shown} — write it as HH:MM-HH:MM in 24-hour time, like {WINDOW_EXAMPLE}."
            )
        h1, m1, h2, m2 = (int(part) for part in match.groups())
        self.window = (time(h1, m1), time(h2, m2))
        zone = cursor._peek()
        if zone is not None and _ZONE.fullmatch(zone):
            self.zone = parse_timezone(zone)
            cursor._skip(zone)

    def policy(self, tz: str | None, limits: GrammarLimits) -> Policy:
        """The policy; ``tz`` (from ``--tz``) is the hours' zone when they name none; the
        operator's ``limits`` (built once from the settings, ``limits_from_settings``) give
        what the words leave out: jitter, the allowed models, the budget, the dedupe window."""
        hours = None
        if self.window is not None or self.weekdays:
            start, end = self.window or (time(0), time(0))
            zone = self.zone or (parse_timezone(tz) if tz else "UTC")
            hours = ActiveHours(start, end, zone, self.weekdays)
        return Policy(
            hours=hours,
            exact=self.exact,
            lasts=self.lasts,
            times=self.times,
            stagger=limits.jitter,
            budget=self.budget or limits.daily_tokens,
            budget_from=_budget_from(self.budget, limits.daily_tokens),
            model=None if self.model is None else check_model(self.model, limits.allowed_models),
            dedupe=limits.dedupe if self.dedupe is None else self.dedupe,
            backoff=self.backoff,
        )


def _budget_from(own: int | None, operator: int | None) -> BudgetSource | None:
    if own:
        return BudgetSource.HEARTBEAT
    return BudgetSource.OPERATOR if operator else None


def _values_after(cursor: Cursor, token: str, count: int) -> list[str]:
    """Up to ``count`` tokens after ``token``, without consuming any."""
    saved, values = cursor.pos, list[str]()
    cursor._skip(token)
    while len(values) < count and (value := cursor._peek()) is not None:
        values.append(value)
        cursor._skip(value)
    cursor.pos = saved
    return values


def _spaced_duration(values: list[str]) -> bool:
    return (
        len(values) == 2
        and _NUMBER.fullmatch(values[0]) is not None
        and unit_seconds(values[1]) is not None
    )


def _fits(word: str, value: str | None) -> bool:
    if word == "budget":
        return is_budget(value)
    pattern = _DURATION if word in _DURATIONS else _WHOLE
    if value is not None and word == "dedupe" and _ZERO.fullmatch(value):
        return True  # "dedupe 0": off
    return value is not None and pattern.fullmatch(value) is not None


def _times(value: str | None) -> int:
    digits = (value or "0").lstrip("0") or "0"
    # Beyond MAX_TIMES by its length alone: int() of thousands of digits is refused by Python.
    count = int(digits) if len(digits) <= len(str(MAX_TIMES)) else MAX_TIMES + 1
    if not 1 <= count <= MAX_TIMES:
        raise CommandError(f"'times' needs a whole number from 1 to {MAX_TIMES}.")
    return count


def policy_words(
    *,
    hours: str | None,
    weekdays: bool,
    exact: bool,
    lasts: str | None,
    times: int | None,
    budget: str | None = None,
    model: str | None = None,
    dedupe: str | None = None,
    backoff: str | None = None,
) -> str:
    """The CLI's and the API's policy options as the policy words of /heartbeat."""
    parts = [f"hours {hours}"] if hours is not None else []
    parts += ["weekdays"] if weekdays else []
    parts += ["exact"] if exact else []
    parts += [f"for {lasts}"] if lasts is not None else []
    parts += [f"times {times}"] if times is not None else []
    parts += [f"budget {budget}"] if budget is not None else []
    parts += [f"model {model}"] if model is not None else []
    parts += [f"dedupe {dedupe}"] if dedupe is not None else []
    parts += [f"backoff {backoff}"] if backoff is not None else []
    return " ".join(" ".join(parts).split())
