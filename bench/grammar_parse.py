"""How long the /heartbeat grammar takes to read a long line (issue 29, finding 4).

Each shape of the issue's attack, at 16k, 32k and 64k characters, through ``parse_command``
twice: with the prompt limit raised so that the whole line is read (``read``: the grammar's
own cost, linear by construction), and with the default limits (``refused``: the length check
that comes before any pattern). ``before`` times the two patterns the fix replaced, on the
shapes that hit them, at smaller sizes (they grow with the square of the length: 16k took
0.79 s in the issue). The goal: a 64 kB line of any shape parses, or is refused, in < 50 ms.
In process, one core; the 1-minute load average is kept beside the figures.
``python -m bench quick --only grammar_parse``.
"""

from __future__ import annotations

import contextlib
import os
import re
import statistics
import time
from collections.abc import Callable

from bench.context import BenchContext, Result
from hbgw.core.errors import GrammarError
from hbgw.sessions.grammar.limits import GrammarLimits
from hbgw.sessions.grammar.slash import parse_command

NAME = "grammar_parse"
GOAL_MS = 50.0
SIZES = (16 * 1024, 32 * 1024, 64 * 1024)
SHAPES: dict[str, Callable[[int], str]] = {
    "mangled number (1eee…e5)": lambda n: "/heartbeat 1" + "e" * (n - 13) + "5",
    "mangled with a unit": lambda n: "/heartbeat 1" + "e" * (n - 14) + "5s",
    "digits": lambda n: "/heartbeat " + "1" * (n - 11),
    "whitespace": lambda n: "/heartbeat " + " " * (n - 12) + "x",
    "cron stars": lambda n: "/heartbeat cron " + ("* " * n)[: n - 16],
    "a sixth cron-ish field": lambda n: "/heartbeat cron 0 9 * * * " + ("1," * n)[: n - 27] + "a",
    "mixed": lambda n: ("/heartbeat every " + "1e5 * ,-.\t" * n)[:n],
}
# The patterns before the fix, on the token of the shape that reached each.
BEFORE: dict[str, tuple[re.Pattern[str], Callable[[int], str]]] = {
    "_MANGLED_INTERVAL": (
        re.compile(r"[+-]?[0-9.][0-9.,_eE+-]*([A-Za-z]+)"),
        lambda n: "1" + "e" * (n - 2) + "5",
    ),
    "_CRONISH": (re.compile(r"[0-9*/,\-]*[0-9*][0-9*/,\-]*"), lambda n: "1," * (n // 2) + "a"),
}


def _parse_ms(line: str, limits: GrammarLimits, repeats: int) -> float:
    """Median milliseconds of ``repeats`` parses of ``line``."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        with contextlib.suppress(GrammarError):  # a refusal with its sentence is an answer
            parse_command(line, limits)
        times.append((time.perf_counter() - start) * 1000)
    return round(statistics.median(times), 3)


def run(ctx: BenchContext) -> Result:
    repeats = 3 if ctx.quick else 9
    read_all = GrammarLimits(max_prompt_chars=max(SIZES))
    parse_command("/heartbeat cron 0 9 * * * warm up")  # croniter's import, once
    shapes = {
        shape: {
            str(size): {
                "read_ms": _parse_ms(build(size), read_all, repeats),
                "refused_ms": _parse_ms(build(size), GrammarLimits(), repeats),
            }
            for size in SIZES
        }
        for shape, build in SHAPES.items()
    }
    before: dict[str, dict[str, float]] = {}
    for name, (pattern, token) in BEFORE.items():
        before[name] = {}
        for size in (4 * 1024, 8 * 1024) if ctx.quick else (4 * 1024, 8 * 1024, 16 * 1024):
            start = time.perf_counter()
            pattern.fullmatch(token(size))
            before[name][str(size)] = round((time.perf_counter() - start) * 1000, 1)
    worst = max(s[str(max(SIZES))]["read_ms"] for s in shapes.values())
    return {
        "goal_ms": GOAL_MS,
        "sizes": list(SIZES),
        "shapes": shapes,
        "worst_64k_ms": worst,
        "before_ms": before,
        "loadavg_1m": round(os.getloadavg()[0], 2),
    }
