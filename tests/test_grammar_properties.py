"""Property tests: the parsers only ever raise their typed errors, and formats round-trip."""

from __future__ import annotations

import contextlib

from hypothesis import given, settings
from hypothesis import strategies as st

from hbgw.errors import GrammarError
from sessions.commands import GrammarLimits, SetHeartbeat, parse_command
from sessions.cron import parse_cron
from sessions.intervals import UNITS, format_interval, parse_interval
from sessions.schedule import IntervalSchedule

UNIT = st.sampled_from(sorted(UNITS))
NUMBER = st.one_of(
    st.integers(min_value=-5, max_value=10**30).map(str),
    st.floats(allow_nan=True, allow_infinity=True).map(str),
    st.decimals(allow_nan=False, allow_infinity=False, places=3).map(str),
)
NEAR_INTERVAL = st.builds(
    lambda every, n, space, unit: f"{every}{n}{space}{unit}",
    st.sampled_from(["", "every ", "EVERY  "]),
    NUMBER,
    st.sampled_from(["", " ", "\t"]),
    UNIT,
)
CRON_FIELD = st.one_of(
    st.sampled_from(["*", "*/0", "*/5", "1-2-3", "61", "0", "5-1", "mon", "x", "", "-", "/", ","]),
    st.text(alphabet="0123456789*/,-abcxyz", max_size=8),
)
NEAR_CRON = st.lists(CRON_FIELD, min_size=3, max_size=7).map(" ".join)
LIMITS = GrammarLimits(min_interval=60, default_interval=300, max_prompt_chars=200)


def only_grammar_errors(call: object, *args: object) -> None:
    with contextlib.suppress(GrammarError):
        call(*args)  # type: ignore[operator]


@settings(max_examples=200)
@given(st.one_of(st.text(), NEAR_INTERVAL))
def test_parse_interval_raises_only_its_error(text: str) -> None:
    only_grammar_errors(parse_interval, text)


@settings(max_examples=200)
@given(st.one_of(st.text(), NEAR_CRON, NEAR_CRON.map(lambda c: "TZ=Asia/Tokyo " + c)))
def test_parse_cron_raises_only_its_error(text: str) -> None:
    only_grammar_errors(parse_cron, text)


@settings(max_examples=200)
@given(
    st.one_of(
        st.text().map(lambda t: "/heartbeat " + t),
        st.tuples(
            st.sampled_from(["", "every ", "--every ", "cron ", "--tz UTC "]),
            NEAR_INTERVAL | NEAR_CRON,
            st.text(max_size=30),
        ).map(lambda p: f"/hb {p[0]}{p[1]} {p[2]}"),
        st.text(),
    )
)
def test_parse_command_raises_only_its_errors(text: str) -> None:
    only_grammar_errors(parse_command, text, LIMITS)


@settings(max_examples=300)
@given(st.integers(min_value=1, max_value=366 * 86400))
def test_format_then_parse_round_trips(seconds: int) -> None:
    assert parse_interval(format_interval(seconds), minimum=1) == seconds


@settings(max_examples=200)
@given(
    st.integers(min_value=60, max_value=366 * 86400),
    st.text(min_size=1, max_size=50).filter(str.strip),
)
def test_set_command_round_trips_its_interval(seconds: int, prompt: str) -> None:
    if prompt.split()[0].lower() in {"status", "pause", "resume", "clear", "stop", "off"}:
        prompt = "x " + prompt
    command = parse_command(f"/heartbeat every {format_interval(seconds)} {prompt}", LIMITS)
    assert isinstance(command, SetHeartbeat)
    assert command.schedule == IntervalSchedule(seconds)
