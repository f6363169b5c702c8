"""The /heartbeat (alias /hb) slash-command grammar.

A lone keyword (status, pause, resume, clear, stop, off) is that command; a keyword followed
by more text is an error rather than a prompt, because "/heartbeat stop checking" most likely
means stop, and a surprise heartbeat would be worse than a question.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from hbgw.errors import CommandError, IntervalError
from sessions.cron import ALIASES, parse_cron, parse_timezone
from sessions.intervals import FORMS, UNITS, parse_interval
from sessions.schedule import CronSchedule, IntervalSchedule, Schedule


@dataclass(frozen=True)
class GrammarLimits:
    min_interval: float = 60
    default_interval: int = 300
    max_prompt_chars: int = 4000


@dataclass(frozen=True)
class ShowStatus:
    pass


@dataclass(frozen=True)
class Pause:
    pass


@dataclass(frozen=True)
class Resume:
    pass


@dataclass(frozen=True)
class Clear:
    pass


@dataclass(frozen=True)
class SetHeartbeat:
    schedule: Schedule
    prompt: str
    schedule_text: str


Command = ShowStatus | Pause | Resume | Clear | SetHeartbeat

KEYWORDS: dict[str, Command] = {
    "status": ShowStatus(),
    "pause": Pause(),
    "resume": Resume(),
    "clear": Clear(),
    "stop": Clear(),
    "off": Clear(),
}
EXAMPLE = "for example: /heartbeat every 10m check CI"
_HEAD = re.compile(r"^\s*/(?:heartbeat|hb)(?:@\w+)?(?=\s|$)", re.IGNORECASE)
_NUMBER_UNIT = re.compile(r"^(\d+(?:\.\d+)?|\.\d+)([a-z]+)$", re.IGNORECASE)
_NUMBER = re.compile(r"^(\d+(?:\.\d+)?|\.\d+)$")
_CRON_TOKEN = re.compile(r"^[\d*/,\-a-z?]+$", re.IGNORECASE)


def is_heartbeat_command(text: str) -> bool:
    return bool(_HEAD.match(text))


def help_text() -> str:
    return (
        "/heartbeat every <interval> <instruction> — set (10m, 1.5h, 90 minutes); "
        "/heartbeat <instruction> — every 5m by default; "
        "/heartbeat @daily <instruction>, /heartbeat cron 0 9 * * 1-5 <instruction> "
        "(TZ=Asia/Tokyo or --tz Asia/Tokyo for a timezone); "
        "/heartbeat status | pause | resume | clear. /hb is short for /heartbeat."
    )


def parse_command(text: str, limits: GrammarLimits = GrammarLimits()) -> Command:
    head = _HEAD.match(text)
    if not head:
        raise CommandError(f"Not a /heartbeat command — {EXAMPLE}.")
    rest = text[head.end() :].strip()
    if not rest:
        return ShowStatus()
    first, _, tail = _split(rest)
    keyword = KEYWORDS.get(first.lower())
    if keyword is not None:
        if tail:
            raise CommandError(
                f"'/heartbeat {first.lower()}' takes nothing after it; to set a heartbeat "
                f"whose instruction starts with '{first}', {EXAMPLE}."
            )
        return keyword
    schedule, schedule_text, prompt = _schedule_and_prompt(rest, limits)
    if schedule is None:
        schedule = IntervalSchedule(limits.default_interval)
    return SetHeartbeat(
        schedule=schedule, prompt=_check_prompt(prompt, limits), schedule_text=schedule_text
    )


def _split(text: str) -> tuple[str, str, str]:
    """(first word, separator, the rest with its inner whitespace kept)."""
    match = re.match(r"(\S+)(\s*)(.*)", text, re.DOTALL)
    assert match is not None
    return match.group(1), match.group(2), match.group(3)


def _schedule_and_prompt(rest: str, limits: GrammarLimits) -> tuple[Schedule | None, str, str]:
    tz: str | None = None
    tz_match = re.search(r"(?:^|\s)--tz(?:=|\s+)(\S+)", rest)
    if tz_match:
        tz = parse_timezone(tz_match.group(1))
        rest = (rest[: tz_match.start()] + " " + rest[tz_match.end() :]).strip()
    first, _, tail = _split(rest)
    lower = first.lower()
    if lower.startswith("--every"):
        value = first.split("=", 1)[1] if "=" in first else None
        interval, after = (value, tail) if value else _interval_tokens(tail, required=True)
        return _interval(interval, limits, after, first if value else f"--every {interval}")
    if lower == "every":
        interval, after = _interval_tokens(tail, required=True)
        return _interval(interval, limits, after, f"every {interval}")
    if lower.startswith("tz=") or lower.startswith("cron_tz="):
        zone = first.split("=", 1)[1]
        if tz and tz != zone:
            raise CommandError(f"Two timezones given ({zone} and {tz}); keep one of them.")
        return _cron(tail, parse_timezone(zone), f"TZ={zone} ")
    if lower == "--cron":
        quoted = re.match(r"""(["'])(.*?)\1\s*(.*)""", tail, re.DOTALL)
        if not quoted:
            raise CommandError(
                '--cron needs its expression in quotes: --cron "0 9 * * 1-5" <instruction>.'
            )
        schedule = parse_cron(quoted.group(2), tz=tz)
        return schedule, f'--cron "{quoted.group(2)}"', quoted.group(3)
    if lower == "cron":
        return _cron(tail, tz, "cron ")
    if lower in ALIASES:
        return parse_cron(lower, tz=tz), lower, tail
    interval, after = _interval_tokens(rest, required=False)
    if interval is not None:
        return _interval(interval, limits, after, interval)
    if tz:
        raise CommandError("--tz only applies to cron schedules (cron …, @daily, TZ=…).")
    return None, "", rest


def _interval_tokens(text: str, *, required: bool) -> tuple[str | None, str]:
    """Split an interval (``10m`` or ``10 m``/``90 minutes``) off the front of ``text``."""
    first, _, tail = _split(text) if text.strip() else ("", "", "")
    if _NUMBER_UNIT.match(first) and _NUMBER_UNIT.match(first).group(2).lower() in UNITS:  # type: ignore[union-attr]
        return first, tail
    if _NUMBER.match(first):
        unit, _, after = _split(tail) if tail.strip() else ("", "", "")
        if unit.lower() in UNITS:
            return f"{first} {unit}", after
    if required:
        shown = first or "nothing"
        raise IntervalError(f"'{shown}' is not an interval — use {FORMS}.")
    return None, text


def _interval(
    interval: str | None, limits: GrammarLimits, prompt: str, text: str
) -> tuple[Schedule, str, str]:
    assert interval is not None
    seconds = parse_interval(interval, minimum=limits.min_interval)
    return IntervalSchedule(seconds), text, prompt


def _cron(text: str, tz: str | None, lead: str) -> tuple[Schedule, str, str]:
    first, _, tail = _split(text) if text.strip() else ("", "", "")
    if first.lower() in ALIASES:
        schedule: CronSchedule = parse_cron(first, tz=tz)
        return schedule, f"{lead}{first.lower()}", tail
    tokens = text.split(None, 5)
    if len(tokens) < 5 or not all(_CRON_TOKEN.match(t) for t in tokens[:5]):
        raise CommandError(
            "A cron schedule needs five fields (minute hour day-of-month month day-of-week) "
            "or @hourly/@daily/@weekly/@monthly, then the instruction."
        )
    expr = " ".join(tokens[:5])
    return parse_cron(expr, tz=tz), f"{lead}{expr}", tokens[5] if len(tokens) > 5 else ""


def _check_prompt(prompt: str, limits: GrammarLimits) -> str:
    prompt = prompt.strip()
    if not prompt:
        raise CommandError(f"The prompt is required — {EXAMPLE}.")
    if len(prompt) > limits.max_prompt_chars:
        raise CommandError(
            f"The prompt is {len(prompt)} characters; the limit is {limits.max_prompt_chars}. "
            "Shorten it."
        )
    return prompt
