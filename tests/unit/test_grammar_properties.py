"""Property tests: the parsers raise only their typed errors, and formats round-trip."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

from croniter import croniter
from hypothesis import given, settings
from hypothesis import strategies as st

from hbgw.core.errors import GrammarError
from hbgw.sessions.grammar import (
    CronSchedule,
    GrammarLimits,
    IntervalSchedule,
    SetHeartbeat,
    format_interval,
    next_fire,
    parse_command,
    parse_cron,
    parse_interval,
)
from hbgw.sessions.grammar.cron import ALIASES
from hbgw.sessions.grammar.intervals import MAX_INTERVAL, UNITS


def words(text: str) -> list[str]:
    return text.split()


# No example database: these tests must not write into the source tree.
EXAMPLES = settings(max_examples=200, deadline=None, database=None)
LIMITS = GrammarLimits(min_interval=60, default_interval=300, max_prompt_chars=200)
ZONES = ["UTC", "Europe/Berlin", "America/New_York", "Australia/Lord_Howe", "Asia/Kolkata"]

SPACE = st.sampled_from(["", " ", "  ", "\t", "\n", "\u00a0"])
UNIT = st.sampled_from([*sorted(UNITS), "M", "Hours", "ms", "parsecs", "", "mn"])
NUMBER = st.one_of(
    st.integers(min_value=-5, max_value=10**40).map(str),
    st.floats(allow_nan=True, allow_infinity=True).map(str),
    st.decimals(allow_nan=False, allow_infinity=False, places=4).map(str),
    st.sampled_from(["1e400", ".5", "5.", "1,5", "1.5.2", "0", "-0", "+3", "9" * 60, "١٠"]),
)
NEAR_INTERVAL = st.builds(
    lambda every, n, space, unit: f"{every}{n}{space}{unit}",
    st.sampled_from(["", "every ", "EVERY  ", "every", "--every "]),
    NUMBER,
    SPACE,
    UNIT,
)
CRON_ATOM = st.sampled_from(
    [
        *words("* */0 */5 */61 1-2-3 61 0 7 5-1 1-5 mon fri-sun jan x - / , 1,,2 L 1#2 ? H */7 31"),
        "",
    ]
)
CRON_FIELD = st.one_of(
    CRON_ATOM,
    st.lists(CRON_ATOM, min_size=1, max_size=3).map(",".join),
    st.text(alphabet="0123456789*/,-abcmonjfrLW#?", max_size=8),
)
NEAR_CRON = st.one_of(
    st.lists(CRON_FIELD, min_size=3, max_size=7).map(" ".join),
    st.sampled_from([*ALIASES, "@midnight", "@reboot", "@sometimes", "@"]),
)
TZ_PREFIX = st.sampled_from(["", "TZ=Asia/Tokyo ", "tz=europe/paris ", "TZ=Mars/Base ", "TZ= "])
WORD = st.sampled_from(
    [
        *words("every --every --every= --every=10m cron --cron --cron= --tz --tz= TZ=UTC"),
        *words("TZ=Nowhere/At_All @daily @hourly @alice @midnight status pause resume stop off"),
        *words("clear 10m 90 minutes 1.5h 0 * */5 1-2-3 check CI --foo 3 1e400s Asia/Tokyo"),
        *['"', "'", "“", "”", "99999999999"],
    ]
)
NEAR_COMMAND = st.builds(
    lambda head, parts, tail: f"{head} {' '.join(parts)}{tail}",
    st.sampled_from(["/heartbeat", "/hb", "/HB", "/heartbeat@Bot", "  /heartbeat\n"]),
    st.lists(st.one_of(WORD, NEAR_INTERVAL, NEAR_CRON), max_size=8),
    st.text(max_size=20),
)


def only_grammar_errors(call: Callable[[], object]) -> None:
    try:
        call()
    except GrammarError as error:
        # Every message is a sentence a person can act on: non-empty, no raw tracebacks.
        assert str(error).strip()
        assert "Traceback" not in str(error)


@EXAMPLES
@given(st.one_of(st.text(), NEAR_INTERVAL))
def test_parse_interval_raises_only_its_error(text: str) -> None:
    only_grammar_errors(lambda: parse_interval(text))


@EXAMPLES
@given(st.one_of(st.text(), NEAR_INTERVAL), st.floats(min_value=0, max_value=10**6))
def test_parse_interval_result_respects_the_minimum(text: str, minimum: float) -> None:
    try:
        seconds = parse_interval(text, minimum=minimum)
    except GrammarError:
        return
    assert isinstance(seconds, int)
    assert max(1, minimum) <= seconds <= MAX_INTERVAL


@EXAMPLES
@given(
    st.one_of(st.text(), st.builds(str.__add__, TZ_PREFIX, NEAR_CRON)),
    st.one_of(st.none(), st.sampled_from(["Asia/Tokyo", "asia/TOKYO", "Mars/Base", "", "\x00"])),
)
def test_parse_cron_raises_only_its_error(text: str, tz: str | None) -> None:
    only_grammar_errors(lambda: parse_cron(text, tz=tz))


MONTHS = words("jan feb mar apr may jun jul aug sep oct nov dec")
DAYS = words("sun mon tue wed thu fri sat")


@st.composite
def cron_field(
    draw: st.DrawFn, low: int, high: int, max_step: int, names: list[str] | None = None
) -> str:
    """One valid field: a comma list of *, */step, n, a-b, a-b/step or n/step (names too)."""

    def value(number: int) -> str:
        # Names count from 1 for months and from 0 for days; either case is accepted.
        if names and draw(st.booleans()):
            name = names[number - low] if number - low < len(names) else names[0]
            return draw(st.sampled_from([name, name.upper(), name.title()]))
        return str(number)

    def element() -> str:
        kind = draw(st.sampled_from(["*", "*/", "n", "a-b", "a-b/", "n/"]))
        step = f"/{draw(st.integers(1, max_step))}" if kind.endswith("/") else ""
        if kind.startswith("*"):
            return "*" + step
        start = draw(st.integers(low, high))
        if kind == "n":
            return value(start)
        if kind == "n/":
            return value(start) + step
        return f"{value(start)}-{value(draw(st.integers(start, high)))}{step}"

    return ",".join(element() for _ in range(draw(st.integers(1, 3))))


@st.composite
def valid_cron(draw: st.DrawFn) -> str:
    """A cron schedule the grammar must accept: TZ= prefix or not, fields or an alias."""
    prefix = draw(st.sampled_from(["", *(f"TZ={zone} " for zone in ZONES), "tz=asia/tokyo "]))
    if draw(st.integers(0, 9)) == 0:
        return prefix + draw(st.sampled_from(sorted(ALIASES))).upper()
    month = draw(cron_field(1, 12, 12, MONTHS))
    # Day 29–31 only where every month has it can fire; otherwise stay within 1–28.
    last_day = 31 if month == "*" else 28
    fields = [
        draw(cron_field(0, 59, 60)),
        draw(cron_field(0, 23, 24)),
        draw(cron_field(1, last_day, 31)),
        month,
        draw(cron_field(0, 7, 7, DAYS)),
    ]
    return prefix + draw(st.sampled_from([" ", "  ", "\t"])).join(fields)


@EXAMPLES
@given(valid_cron())
def test_a_valid_cron_is_accepted_reparses_to_itself_and_fires(text: str) -> None:
    schedule = parse_cron(text)
    assert parse_cron(schedule.expr, tz=schedule.timezone) == schedule
    anchor = datetime(2026, 1, 1, tzinfo=UTC)
    assert next_fire(schedule, anchor) > anchor


@EXAMPLES
@given(st.one_of(st.text(), st.text().map(lambda t: "/heartbeat " + t), NEAR_COMMAND))
def test_parse_command_raises_only_its_errors(text: str) -> None:
    only_grammar_errors(lambda: parse_command(text, LIMITS))


@EXAMPLES
@given(NEAR_COMMAND)
def test_a_set_command_reparses_from_its_schedule_text(text: str) -> None:
    try:
        command = parse_command(text, LIMITS)
    except GrammarError:
        return
    if not isinstance(command, SetHeartbeat):
        return
    assert command.prompt == command.prompt.strip() and command.prompt
    assert len(command.prompt) <= LIMITS.max_prompt_chars
    again = parse_command(f"/hb {command.schedule_text} {command.prompt}", LIMITS)
    assert again == command


@settings(max_examples=300, deadline=None, database=None)
@given(st.integers(min_value=1, max_value=MAX_INTERVAL))
def test_format_then_parse_round_trips(seconds: int) -> None:
    assert parse_interval(format_interval(seconds), minimum=1) == seconds


PROMPT = st.text(min_size=1, max_size=60).filter(
    lambda p: bool(p.strip()) and not p.split()[0].startswith("--")
)


@EXAMPLES
@given(
    st.integers(min_value=60, max_value=MAX_INTERVAL),
    st.sampled_from(["every {}", "{}", "--every {}", "--every={}"]),
    PROMPT,
)
def test_set_command_round_trips_its_interval(seconds: int, form: str, prompt: str) -> None:
    schedule_text = form.format(format_interval(seconds))
    command = parse_command(f"/heartbeat {schedule_text} {prompt}", LIMITS)
    assert command == SetHeartbeat(IntervalSchedule(seconds), prompt.strip(), schedule_text)
    assert command.schedule.describe() == f"every {format_interval(seconds)}"


SIMPLE_CRON = st.builds(
    lambda minute, hour: f"{minute} {hour} * * *",
    st.sampled_from(["0", "30", "*/20", "15,45", "*"]),
    st.sampled_from(["*", "1", "2", "1-3", "*/2", "0,12"]),
)


@settings(max_examples=100, deadline=None, database=None)
@given(
    SIMPLE_CRON,
    st.sampled_from(ZONES),
    st.datetimes(min_value=datetime(2020, 1, 1), max_value=datetime(2030, 12, 31)),
)
def test_cron_next_is_later_and_lands_on_the_schedule(
    expr: str, zone: str, anchor: datetime
) -> None:
    schedule = CronSchedule(expr, zone)
    first = next_fire(schedule, anchor.replace(tzinfo=UTC))
    second = next_fire(schedule, first)
    assert anchor.replace(tzinfo=UTC) < first < second
    for moment in (first, second):
        assert moment.tzinfo is UTC
        local = moment.astimezone(ZoneInfo(zone))
        just_before = (moment - timedelta(seconds=1)).astimezone(ZoneInfo(zone))
        # Either the wall time is on the schedule, or it is the end of a skipped (DST) gap.
        on_schedule = croniter.match(expr, local.replace(tzinfo=None))
        assert on_schedule or just_before.utcoffset() != local.utcoffset()
