"""Issue 29, finding 4: the /heartbeat grammar reads any line in time linear in its length.

``_MANGLED_INTERVAL`` (``[0-9.][0-9.,_eE+-]*([A-Za-z]+)``) and ``_CRONISH``
(``[0-9*/,\\-]*[0-9*][0-9*/,\\-]*``) backtracked quadratically: ``/heartbeat 1eee…e5`` of 16k
characters took 0.79 s, 60k 11.6 s, and the prompt's length was checked only after them. Now a
line longer than any command is refused before a pattern reads it, and every pattern of the
grammar and the inbound parsers is linear by construction: no repeated part can take a
character that what follows it could also take (checked on the parsed patterns below; no
timing in tests — ``bench/grammar_parse.py`` measures it)."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from types import ModuleType
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hbgw.core.errors import CommandError, GrammarError, IntervalError
from hbgw.gateway.platforms.slack import events as slack_events
from hbgw.gateway.platforms.telegram import updates as telegram_updates
from hbgw.sessions import validation
from hbgw.sessions.grammar import (
    costs,
    cron,
    cron_slash,
    hours,
    intervals,
    job_schedule,
    limits,
    policy,
    slash,
)
from hbgw.sessions.grammar.cron_slash import parse_cron_command
from hbgw.sessions.grammar.intervals import parse_interval
from hbgw.sessions.grammar.limits import GrammarLimits
from hbgw.sessions.grammar.slash import SetHeartbeat, parse_command

_parser: Any = getattr(re, "_parser")  # noqa: B009 - the stdlib's own pattern parser
C: Any = getattr(re, "_constants")  # noqa: B009 - its opcodes
NOW = datetime(2027, 1, 5, 9, 0, tzinfo=UTC)
KB64 = 64 * 1024

# -- a checker: no repeat may take what its follower could take ----------------------------

# ASCII, then two stand-ins: 128 for every space beyond ASCII, 129 for every other character.
ALL = frozenset(range(130))
SPACE = frozenset({9, 10, 11, 12, 13, 28, 29, 30, 31, 32, 128})
DIGIT = frozenset(range(48, 58)) | {129}
WORD = frozenset([*range(48, 58), *range(65, 91), *range(97, 123), 95, 129])
CATEGORIES = {
    C.CATEGORY_SPACE: SPACE,
    C.CATEGORY_NOT_SPACE: ALL - SPACE,
    C.CATEGORY_DIGIT: DIGIT,
    C.CATEGORY_NOT_DIGIT: ALL - DIGIT | {129},
    C.CATEGORY_WORD: WORD,
    C.CATEGORY_NOT_WORD: ALL - WORD | {129},
}


def _cased(code: int) -> frozenset[int]:
    """A literal and its other case: every pattern is read as if IGNORECASE (conservative)."""
    if code >= 128:
        return frozenset({128, 129})
    char = chr(code)
    return frozenset({code, ord(char.lower()), ord(char.upper())})


def _in_set(items: list[tuple[Any, Any]]) -> frozenset[int]:
    found: set[int] = set()
    negate = False
    for op, av in items:
        if op is C.NEGATE:
            negate = True
        elif op is C.LITERAL:
            found |= _cased(av)
        elif op is C.RANGE:
            for code in range(av[0], av[1] + 1):
                found |= _cased(code)
        elif op is C.CATEGORY:
            found |= CATEGORIES[av]
        else:
            raise AssertionError(f"unexpected {op} in a set")
    return ALL - found | {128, 129} if negate else frozenset(found)


def _first(seq: Iterable[tuple[Any, Any]]) -> tuple[frozenset[int], bool]:
    """The characters a sequence can start with, and whether it can match nothing."""
    found: frozenset[int] = frozenset()
    for item in seq:
        chars, nullable = _first_item(item)
        found |= chars
        if not nullable:
            return found, False
    return found, True


def _first_item(item: tuple[Any, Any]) -> tuple[frozenset[int], bool]:
    op, av = item
    if op is C.LITERAL:
        return _cased(av), False
    if op is C.NOT_LITERAL:
        return ALL - {av} | {128, 129}, False
    if op is C.ANY:
        return ALL, False
    if op is C.IN:
        return _in_set(av), False
    if op in (C.MAX_REPEAT, C.MIN_REPEAT, C.POSSESSIVE_REPEAT):
        chars, nullable = _first(av[2])
        return chars, nullable or av[0] == 0
    if op is C.SUBPATTERN:
        return _first(av[3])
    if op is C.BRANCH:
        firsts = [_first(branch) for branch in av[1]]
        return frozenset().union(*(f for f, _ in firsts)), any(n for _, n in firsts)
    if op in (C.AT, C.ASSERT, C.ASSERT_NOT):
        return frozenset(), True
    raise AssertionError(f"unexpected {op} in a pattern")


def overlaps(seq: list[tuple[Any, Any]], follow: frozenset[int] = frozenset()) -> list[str]:
    """Repeats that can take a character their follower (or their own next round) can take:
    the shapes that backtrack more than linearly."""
    found: list[str] = []
    for i, (op, av) in enumerate(seq):
        rest, nullable = _first(seq[i + 1 :])
        after = rest | follow if nullable else rest
        if op in (C.MAX_REPEAT, C.MIN_REPEAT):
            _low, high, body = av
            body_first, _ = _first(body)
            if high > 1 and body_first & after:
                shown = sorted(chr(c) if c < 128 else "…" for c in body_first & after)[:8]
                found.append(f"a repeat shares {shown} with what follows it")
            found += overlaps(body, body_first | after if high > 1 else after)
        elif op is C.SUBPATTERN:
            found += overlaps(av[3], after)
        elif op is C.BRANCH:
            for branch in av[1]:
                found += overlaps(branch, after)
    return found


def is_linear(pattern: str | re.Pattern[str]) -> bool:
    text = pattern if isinstance(pattern, str) else pattern.pattern
    return not overlaps(list(_parser.parse(text)))


MODULES: list[ModuleType] = [
    costs,
    cron,
    cron_slash,
    hours,
    intervals,
    job_schedule,
    limits,
    policy,
    slash,
    validation,
    slack_events,
    telegram_updates,
]
PATTERNS = [
    pytest.param(value, id=f"{module.__name__.rsplit('.', 1)[-1]}.{name}")
    for module in MODULES
    for name, value in vars(module).items()
    if isinstance(value, re.Pattern)
] + [
    pytest.param(form.pattern, id=f"validation.{platform}.{n}")
    for platform, forms in validation.PLATFORM_IDS.items()
    for n, form in enumerate(forms)
]


@pytest.mark.parametrize("pattern", PATTERNS)
def test_every_pattern_of_the_grammar_and_the_inbound_parsers_is_linear(
    pattern: re.Pattern[str],
) -> None:
    assert overlaps(list(_parser.parse(pattern.pattern))) == []


@pytest.mark.parametrize(
    "pattern",
    [
        r"[+-]?[0-9.][0-9.,_eE+-]*([A-Za-z]+)",  # _MANGLED_INTERVAL, before
        r"[0-9*/,\-]*[0-9*][0-9*/,\-]*",  # _CRONISH, before
        r"(?:a+)+b",
        r"\s*\s*x",
    ],
)
def test_the_checker_finds_the_backtracking_shapes(pattern: str) -> None:
    assert not is_linear(pattern)


# -- the length limit comes first ------------------------------------------------------------

SHAPES: dict[str, Callable[[int], str]] = {
    "mangled number": lambda n: "/heartbeat 1" + "e" * (n - 13) + "5",
    "mangled with a unit": lambda n: "/heartbeat 1" + "e" * (n - 14) + "5s",
    "digits": lambda n: "/heartbeat " + "1" * (n - 11),
    "digits and a unit": lambda n: "/heartbeat " + "1" * (n - 12) + "m",
    "whitespace": lambda n: "/heartbeat " + " " * (n - 12) + "x",
    "cron stars": lambda n: "/heartbeat cron " + ("* " * n)[: n - 16],
    "a sixth cron-ish field": lambda n: "/heartbeat cron 0 9 * * * " + ("1," * n)[: n - 27] + "a",
    "mixed": lambda n: ("/heartbeat every " + "1e5 * ,-.\t" * n)[:n],
    "dots": lambda n: "/heartbeat " + ("1." * n)[: n - 11],
}


class NoPattern:
    """Stands in for the grammar's first pattern: reading it fails the test."""

    def match(self, *_args: object) -> None:
        raise AssertionError("a pattern read a line longer than any command")


@pytest.mark.parametrize("shape", SHAPES)
def test_a_64k_line_is_refused_by_its_length_before_any_pattern(
    shape: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(slash, "_HEAD", NoPattern())
    monkeypatch.setattr(cron_slash, "_HEAD", NoPattern())
    line = SHAPES[shape](KB64)
    assert len(line) == KB64
    with pytest.raises(CommandError, match=r"^The /heartbeat command is too long — 65536 "):
        parse_command(line)
    cron_line = "/cron add every 1h -- " + line
    with pytest.raises(CommandError, match=r"^The /cron command is too long"):
        parse_cron_command(cron_line, NOW, GrammarLimits())


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("allowed", [GrammarLimits(), GrammarLimits(max_prompt_chars=KB64)])
def test_each_shape_at_the_limit_parses_or_gets_the_grammars_sentence(
    shape: str, allowed: GrammarLimits
) -> None:
    """At the default limit and with HBGW_MAX_PROMPT_CHARS raised so that 64 kB is read."""
    line = SHAPES[shape](allowed.max_command_chars)
    assert len(line) == allowed.max_command_chars
    try:
        parse_command(line, allowed)
    except GrammarError as exc:
        assert str(exc).endswith((".", "?", "'")) and "\n" not in str(exc)


def test_the_limit_is_the_longest_prompt_and_room_for_its_schedule() -> None:
    allowed = GrammarLimits(max_prompt_chars=100)
    prompt = "p" * 100
    longest = "/heartbeat every 5m hours 09:00-18:00 Europe/Paris weekdays times 3 " + prompt
    assert isinstance(parse_command(longest, allowed), SetHeartbeat)
    assert allowed.max_command_chars == 100 + limits.COMMAND_ROOM


def test_an_interval_text_is_refused_by_its_length_before_its_pattern() -> None:
    with pytest.raises(IntervalError, match="is too long to be an interval"):
        parse_interval("every 5 minutes" + " ." * (KB64 // 2))


@pytest.mark.parametrize(
    ("words", "sentence"),
    [
        ("times " + "1" * 5000, "'times' needs a whole number from 1 to 1000000."),
        ("times 0000000000005", None),
        ("budget " + "9" * 400, "A token budget is a whole number of tokens"),
        ("budget " + "9" * 5000 + ".5k", "A token budget is a whole number of tokens"),
    ],
)
def test_long_numbers_in_policies_get_a_sentence_not_an_overflow(
    words: str, sentence: str | None
) -> None:
    """``int()`` of 5,000 digits raised ValueError, ``int(float("9" * 400))`` OverflowError."""
    line = f"/heartbeat every 5m {words} check CI"
    if sentence is None:
        command = parse_command(line)
        assert isinstance(command, SetHeartbeat) and command.policy.times == 5
        return
    with pytest.raises(CommandError) as refused:
        parse_command(line, GrammarLimits(max_prompt_chars=KB64))
    assert str(refused.value).startswith(sentence)


# -- the hand-written readers answer as the patterns they replace ---------------------------

OLD_GLUED = re.compile(rf"({intervals.NUMBER})([A-Za-z]+)")
OLD_MANGLED = re.compile(r"[+-]?[0-9.][0-9.,_eE+-]*([A-Za-z]+)")
OLD_CRONISH = re.compile(r"[0-9*/,\-]*[0-9*][0-9*/,\-]*")
TOKENS = st.text(alphabet="+-0.19,_eEsmhdxy*/ ", max_size=12)


@given(TOKENS)
def test_reading_a_token_by_hand_matches_the_patterns_it_replaced(token: str) -> None:
    number, letters = slash._split_unit(token)
    glued = OLD_GLUED.fullmatch(token)
    now_glued = bool(letters) and slash._BARE_NUMBER.fullmatch(number) is not None
    assert (glued.groups() if glued else None) == ((number, letters) if now_glued else None)
    mangled = OLD_MANGLED.fullmatch(token)
    assert (mangled.group(1) if mangled else None) == slash._mangled_unit(number, letters)
    assert bool(OLD_CRONISH.fullmatch(token)) == bool(slash._CRONISH.fullmatch(token))
