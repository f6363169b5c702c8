"""The /heartbeat (alias /hb) slash-command grammar.

``/heartbeat [schedule] <prompt>`` where the schedule is, in any order with an optional
``--tz Area/City``: ``every <interval>``, ``<interval>``, ``--every <interval>``,
``--every=<interval>``, ``--cron "<expr>"``, ``cron <5 fields>``, ``@hourly`` (and the other
aliases) or ``TZ=Area/City <5 fields | @alias>``. An interval is ``10m``, ``1.5h`` or a number
and a unit word (``90 minutes``, ``10 m``).

Ambiguous forms, decided on purpose:

- A lone keyword (``status``, ``pause``, ``resume``, ``clear``, ``stop``, ``off``, trailing ``.``
  or ``!`` allowed) is that command. A keyword followed by more text (``/heartbeat stop checking
  CI``) is an error, not a prompt: it most likely means the command, and a surprise recurring
  heartbeat is worse than a question. Such a prompt can still be set by giving the schedule first
  (``/heartbeat every 5m stop …``).
- A one-word prompt a typo away from a keyword (``stauts``, ``pasue``: one edit for the short
  keywords, two for the longer ones) is a question ("Did you mean /heartbeat status?"), not a
  heartbeat; the answer says how to set that text on purpose (give the schedule first).
- ``every`` (or ``--every``) must be followed by an interval; ``every morning`` is an error, never
  silently a prompt. A leading number is an interval only when a unit follows it (``3 things to
  check`` is a prompt; ``5 days ago …`` is an interval).
- ``cron`` and five unquoted fields: a sixth token that looks like a cron field (``*``, ``0``) is an
  error (seconds are not supported); a prompt starting with such a token needs ``--cron "…"``.
- ``@hourly`` etc. start a cron schedule; any other ``@word`` (``@alice``) begins the prompt, except
  ``@midnight`` / ``@reboot``, which get an error rather than becoming a prompt.
- An unknown ``--option`` at the start is an error, not a prompt.
- Policy words (``hours``, ``weekdays``, ``exact``, ``for``, ``times``, ``dedupe``,
  ``backoff``, ``budget``, ``model``; ``grammar.policy``)
  follow the schedule; a prompt given without a schedule never starts with one.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from string import ascii_letters

from hbgw.core.errors import CommandError, CronError, IntervalError
from hbgw.sessions.grammar.cron import ALIASES, UNSUPPORTED_ALIASES, parse_cron
from hbgw.sessions.grammar.intervals import (
    NUMBER,
    IntervalSchedule,
    format_interval,
    forms_error,
    parse_interval,
    unit_seconds,
)
from hbgw.sessions.grammar.limits import GrammarLimits
from hbgw.sessions.grammar.policy import NO_POLICY, Policy, PolicyDraft
from hbgw.sessions.grammar.schedule import Schedule
from hbgw.sessions.grammar.text import edit_distance, quote


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
class ShowHelp:
    pass


@dataclass(frozen=True)
class SetHeartbeat:
    schedule: Schedule
    prompt: str
    schedule_text: str
    """What the user wrote for the schedule (whitespace collapsed); "" when the default applied."""
    policy: Policy = NO_POLICY


Command = ShowStatus | ShowHelp | Pause | Resume | Clear | SetHeartbeat

KEYWORDS: dict[str, Command] = {
    "status": ShowStatus(),
    "pause": Pause(),
    "resume": Resume(),
    "clear": Clear(),
    "stop": Clear(),
    "off": Clear(),
    # A heartbeat whose whole instruction is "help" is surely a request for the usage.
    "help": ShowHelp(),
}
EXAMPLE = "for example: /heartbeat every 10m check CI"
_HEAD = re.compile(r"\s*/(?:heartbeat|hb)(?:@[A-Za-z0-9_]+)?(?=\s|$)", re.IGNORECASE)
_TOKEN = re.compile(r"\S+")
_BARE_NUMBER = re.compile(NUMBER)
# The numeric-looking part of a mangled interval (1e400s, 1,5h, 1.5.2m). A token's trailing
# letters are split off by hand (``_split_unit``) before a pattern reads the rest: one pattern
# for both would backtrack over the digits (and the e's) for every letter it tried.
_MANGLED_NUMBER = re.compile(r"[+-]?[0-9.][0-9.,_eE+-]*")
_TZ_TOKEN = re.compile(r"(?:cron_)?tz=", re.IGNORECASE)
# Cron-field characters with at least one digit or star. The run before the first digit or star
# holds neither, so no two parts of the pattern can take the same character (linear time).
_CRONISH = re.compile(r"[/,\-]*[0-9*][0-9*/,\-]*")
_LONGEST_KEYWORD = max(map(len, KEYWORDS))
_QUOTES = {'"': '"', "'": "'", "“": "”", "‘": "’", "«": "»"}  # chat apps curl quotes


def is_heartbeat_command(text: str) -> bool:
    """True when ``text`` starts with /heartbeat or /hb as a whole word (/heartbeat@Bot too)."""
    return _HEAD.match(text) is not None


def help_text() -> str:
    return "\n".join(
        [
            "/heartbeat repeats a prompt in this conversation whenever it is idle and due:",
            "/heartbeat every 10m <prompt> — set it (also 10m, 90 minutes, --every 1.5h; "
            "units s, m, h, d)",
            "/heartbeat <prompt> — set it with the default interval",
            "/heartbeat cron 0 9 * * 1-5 <prompt> — on a cron schedule "
            '(also @hourly, @daily, @weekly, @monthly, --cron "0 9 * * *")',
            "/heartbeat TZ=Asia/Tokyo 0 9 * * * <prompt> — cron in a timezone "
            "(or add --tz Asia/Tokyo)",
            "/heartbeat every 15m hours 09:00-18:00 Europe/Paris weekdays for 7d times 20 "
            "<prompt> — policies after the schedule: active hours, an end; exact: no jitter; "
            "budget 50k: tokens a day, then it pauses; model NAME: an allowed model",
            "/heartbeat every 15m dedupe 6h backoff 4h <prompt> — hold back a reply repeated "
            "within 6h (default 1d, dedupe 0: off); quiet fires double the interval up to 4h",
            "/heartbeat status — show it; /heartbeat pause, /heartbeat resume — hold, restart",
            "/heartbeat clear (or stop, off) — remove it; /hb is short for /heartbeat",
        ]
    )


def check_command_length(text: str, limits: GrammarLimits, command: str) -> None:
    """A line longer than any command can be is refused before a pattern reads it."""
    if len(text) > limits.max_command_chars:
        raise CommandError(
            f"The {command} command is too long — {len(text)} characters; the limit is "
            f"{limits.max_command_chars} (a prompt of at most {limits.max_prompt_chars}, "
            "HBGW_MAX_PROMPT_CHARS, and its schedule)."
        )


def parse_command(text: str, limits: GrammarLimits = GrammarLimits()) -> Command:
    """Parse one /heartbeat command; every failure is a GrammarError with one sentence."""
    check_command_length(text, limits, "/heartbeat")
    head = _HEAD.match(text)
    if head is None:
        raise CommandError(
            f"That is not a /heartbeat command — start with /heartbeat or /hb, {EXAMPLE}."
        )
    rest = text[head.end() :].strip()
    if not rest:
        return ShowStatus()
    first = rest.split(None, 1)[0]
    keyword = KEYWORDS.get(first.lower().rstrip(".!"))
    if keyword is not None:
        if len(first) == len(rest):
            return keyword
        word = first.lower()
        raise CommandError(
            f"'/heartbeat {word}' takes nothing after it — to set a prompt that starts with "
            f"'{word}', give the schedule first, for example: /heartbeat every 5m {word} …"
        )
    schedule, pos, policy = _Head(rest, limits).parse()
    prompt = check_prompt(rest[pos:], limits)
    if schedule is None:
        _refuse_mistyped_keyword(prompt, limits)
        return SetHeartbeat(IntervalSchedule(limits.default_interval), prompt, "", policy)
    return SetHeartbeat(schedule, prompt, " ".join(rest[:pos].split()), policy)


def _refuse_mistyped_keyword(prompt: str, limits: GrammarLimits) -> None:
    """A one-word prompt a typo away from a keyword is most likely that command, mistyped."""
    if len(prompt.split()) != 1:
        return
    word = prompt.lower().rstrip(".!")
    if len(word) > _LONGEST_KEYWORD + 2:
        return  # more than two edits from every keyword: no need to count them
    # Short keywords (off, stop, help) allow one edit: two would turn "hello" into "help".
    close = [
        (distance, keyword)
        for keyword in KEYWORDS
        if (distance := edit_distance(word, keyword)) <= (1 if len(keyword) <= 4 else 2)
    ]
    if close:
        keyword = min(close, key=lambda pair: pair[0])[1]  # ties: the first in KEYWORDS
        raise CommandError(
            f"Did you mean /heartbeat {keyword}? To set a heartbeat with this text, write "
            f"/heartbeat every {format_interval(limits.default_interval)} {prompt}."
        )


def check_prompt(prompt: str, limits: GrammarLimits, *, example: str = EXAMPLE) -> str:
    """The prompt without surrounding space; missing or too long is a CommandError."""
    prompt = prompt.strip()
    if not prompt:
        raise CommandError(f"The prompt is required — {example}.")
    if len(prompt) > limits.max_prompt_chars:
        raise CommandError(
            f"The prompt is too long — {len(prompt)} characters; "
            f"the limit is {limits.max_prompt_chars}."
        )
    return prompt


def option_schedule(
    *, every: str | None, cron: str | None, tz: str | None, limits: GrammarLimits
) -> Schedule | None:
    """The schedule that ``--every``, ``--cron`` and ``--tz`` describe, by the /heartbeat rules.

    None when neither --every nor --cron is given (the caller applies the default interval).
    """
    if every is not None and cron is not None:
        raise CommandError("Give one schedule — --every or --cron, not both.")
    interval = None if every is None else parse_interval(every, minimum=limits.min_interval)
    return _schedule(interval, cron, tz, limits)


def _schedule(
    interval: int | None, cron: str | None, tz: str | None, limits: GrammarLimits
) -> Schedule | None:
    if cron is not None:
        return parse_cron(cron, tz=tz, minimum=limits.min_interval)
    if tz is not None:
        raise CommandError(
            '--tz only applies to cron schedules (cron …, @daily, TZ=…, --cron "…") and to '
            "active hours (hours 09:00-18:00); an interval runs the same in every timezone."
        )
    return None if interval is None else IntervalSchedule(interval)


class _Head:
    """Reads the schedule part in front of the prompt; ``pos`` is where the prompt starts."""

    def __init__(self, rest: str, limits: GrammarLimits) -> None:
        self.rest = rest
        self.limits = limits
        self.pos = 0
        self.tz: str | None = None
        self.cron: str | None = None
        self.interval: int | None = None
        self.draft = PolicyDraft()

    def parse(self) -> tuple[Schedule | None, int, Policy]:
        while (token := self._peek()) is not None and self._step(token):
            pass
        policy = self.draft.policy(self.tz, self.limits)
        # With an interval, --tz can only be the active hours' zone.
        hours_tz = self.cron is None and self.draft.zone is None and policy.hours is not None
        tz = None if hours_tz else self.tz
        return _schedule(self.interval, self.cron, tz, self.limits), self.pos, policy

    def _step(self, token: str) -> bool:
        """Consume one schedule element at ``pos``; False when the prompt starts here."""
        word = token.lower()
        if word == "--tz" or word.startswith("--tz="):
            if self.tz is not None:
                raise CommandError("--tz is given twice — give one timezone.")
            self.tz = self._option_value(token, "--tz", "a timezone, like --tz Europe/Paris")
            return True
        if self.cron is not None or self.interval is not None:
            # One schedule only; then policy words, and whatever follows is the prompt.
            return self.draft.step(self, self.limits.min_interval)
        if word.startswith("--every="):
            value = self._option_value(token, "--every", "an interval, like --every=10m")
            self.interval = parse_interval(value, minimum=self.limits.min_interval)
            return True
        if word in ("every", "--every"):
            self._skip(token)
            if not self._read_interval():
                shown = self._peek()
                raise forms_error(shown) if shown else _needs_interval(word)
            return True
        if word == "--cron" or word.startswith("--cron="):
            self.cron = self._cron_option(token)
            return True
        if word == "cron":
            self._skip(token)
            self.cron = self._cron_fields()
            return True
        if word in ALIASES or word in UNSUPPORTED_ALIASES or _TZ_TOKEN.match(word):
            self.cron = self._cron_fields()
            return True
        if word.startswith("--") and word[2:3].isalpha():
            raise CommandError(
                f"Unknown option {quote(token)} — the options are --every, --cron and --tz."
            )
        return self._read_interval()

    # -- tokens ---------------------------------------------------------------------------

    def _peek(self) -> str | None:
        match = _TOKEN.search(self.rest, self.pos)
        return match.group() if match else None

    def _skip(self, token: str) -> None:
        self.pos = self.rest.index(token, self.pos) + len(token)

    def _option_value(self, token: str, option: str, what: str) -> str:
        """The value of ``--opt value`` or ``--opt=value``."""
        self._skip(token)
        value = token[len(option) + 1 :] if "=" in token else self._peek()
        if not value:
            raise CommandError(f"{option} needs {what}.")
        if "=" not in token:
            self._skip(value)
        return value

    # -- intervals ------------------------------------------------------------------------

    def _read_interval(self) -> bool:
        """Consume ``10m`` or ``90 minutes`` at ``pos``; False (nothing consumed) otherwise."""
        token = self._peek()
        if token is None:
            return False
        number, letters = _split_unit(token)
        if letters and _BARE_NUMBER.fullmatch(number) and unit_seconds(letters) is not None:
            self._skip(token)
            text = token
        elif (unit := _mangled_unit(number, letters)) is not None and unit_seconds(unit):
            raise forms_error(token)
        elif not letters and _BARE_NUMBER.fullmatch(token):
            start = self.pos
            self._skip(token)
            unit = self._peek()
            if unit is None or unit_seconds(unit) is None:
                self.pos = start
                return False
            self._skip(unit)
            text = f"{token} {unit}"
        else:
            return False
        self.interval = parse_interval(text, minimum=self.limits.min_interval)
        return True

    # -- cron -----------------------------------------------------------------------------

    def _cron_option(self, token: str) -> str:
        """``--cron "<expr>"`` (straight or curly quotes), ``--cron=@daily`` or bare fields."""
        self._skip(token)
        if "=" in token:
            inline = token[len("--cron=") :]
            if inline and inline[0] in _QUOTES:
                self.pos -= len(inline)  # re-read from the opening quote
            elif inline.startswith("@"):
                return inline
            else:
                raise CommandError('--cron needs the expression in quotes: --cron "0 9 * * 1-5".')
        else:
            self.pos = len(self.rest) - len(self.rest[self.pos :].lstrip())
        opening = self.rest[self.pos : self.pos + 1]
        if opening not in _QUOTES:
            return self._cron_fields()
        closing = self.rest.find(_QUOTES[opening], self.pos + 1)
        if closing < 0:
            raise CommandError(f"The --cron expression has no closing {_QUOTES[opening]}.")
        expr = self.rest[self.pos + 1 : closing]
        self.pos = closing + 1
        return expr

    def _cron_fields(self) -> str:
        """An optional TZ= token, then an @alias or five fields, as text for parse_cron."""
        parts: list[str] = []
        token = self._peek()
        if token is not None and _TZ_TOKEN.match(token):
            parts.append(token)
            self._skip(token)
            token = self._peek()
            if token is not None and token.lower() == "cron":  # TZ=… cron 0 9 * * *
                self._skip(token)
                token = self._peek()
        if token is not None and token.startswith("@"):
            self._skip(token)
            return " ".join([*parts, token])
        fields: list[str] = []
        while len(fields) < 5 and (token := self._peek()) is not None:
            fields.append(token)
            self._skip(token)
        extra = self._peek()
        if len(fields) == 5 and extra is not None and _CRONISH.fullmatch(extra):
            raise CronError(
                f"A cron schedule has five fields, and {quote(extra)} looks like a sixth — "
                'seconds are not supported; if the prompt starts with it, use --cron "…".'
            )
        return " ".join([*parts, *fields])


def _split_unit(token: str) -> tuple[str, str]:
    """``token`` as what precedes its trailing ASCII letters, and those letters: ``1.5h`` is
    ``("1.5", "h")``, ``90`` is ``("90", "")``."""
    cut = len(token.rstrip(ascii_letters))
    return token[:cut], token[cut:]


def _mangled_unit(number: str, letters: str) -> str | None:
    """The unit glued to numeric-looking text (``s`` of ``1e400s``), or None.

    What ``[+-]?[0-9.][0-9.,_eE+-]*([A-Za-z]+)`` captured, without its backtracking: the
    trailing letters, less the leading e's that the number part takes (all but the last)."""
    if not letters or _MANGLED_NUMBER.fullmatch(number) is None:
        return None
    return letters.lstrip("eE") or letters[-1]


def _needs_interval(word: str) -> IntervalError:
    return IntervalError(
        f"'{word}' needs an interval after it — write a number and a unit, like {word} 10m."
    )
