"""The schedule of a cron job: ``in 10m``, ``at 2027-01-05T09:00+01:00``, ``every 2h``, five
cron fields (``0 9 * * 1-5``, optionally ``cron`` first or ``TZ=Area/City`` in front) or an
@alias. Pure: ``now`` is an argument.

``in`` and ``at`` run once; ``every`` and cron repeat, and HBGW_MIN_INTERVAL binds them as it
binds heartbeats (cron's two closest fires included, ``cron.smallest_gap``). A repeating
schedule is jittered (``sessions.jobs``) unless its text ends with the word ``exact``: the
stored schedule text is where a job keeps that choice.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from hbgw.core.errors import CommandError
from hbgw.sessions.grammar.cron import CronSchedule, cron_next, parse_cron
from hbgw.sessions.grammar.intervals import IntervalSchedule, format_interval, parse_interval
from hbgw.sessions.grammar.text import quote

FORMS = (
    "in 10m, at 2027-01-05T09:00+01:00, every 2h, five cron fields such as 0 9 * * 1-5, "
    "or @hourly, @daily, @weekly, @monthly, @yearly"
)


@dataclass(frozen=True)
class OnceSchedule:
    """One run, at ``at`` (aware UTC)."""

    at: datetime

    def describe(self) -> str:
        return f"once at {self.at.isoformat().replace('+00:00', 'Z')}"


JobSchedule = OnceSchedule | IntervalSchedule | CronSchedule
EXACT = "exact"


def is_exact(text: str) -> bool:
    """Whether a job's schedule text opts out of jitter (its last word is ``exact``)."""
    words = text.split()
    return bool(words) and words[-1].lower() == EXACT


def exact_text(text: str, schedule: JobSchedule, exact: bool) -> str:
    """The schedule text to store: ``exact`` added to a repeating schedule that should fire on
    its exact times (asked for, or HBGW_JITTER=false), once."""
    if exact and not is_exact(text) and not isinstance(schedule, OnceSchedule):
        return f"{text} {EXACT}"
    return text


def parse_job_schedule(
    text: str, *, now: datetime, min_interval: float, tz: str | None = None
) -> JobSchedule:
    """Every failure is a GrammarError with one sentence naming what to change. A last word
    ``exact`` (no jitter) is not part of the schedule."""
    words = text.split()
    if is_exact(text):
        words = words[:-1]
        text = " ".join(words)
    if not words:
        raise CommandError(f"A job needs a schedule — {FORMS}.")
    head, rest = words[0].lower(), " ".join(words[1:])
    if head in ("in", "at", "every") and tz is not None:
        raise CommandError(
            "--tz only applies to cron schedules; 'at' takes its offset in the time itself."
        )
    if head == "in":
        return OnceSchedule(now.astimezone(UTC) + timedelta(seconds=_delay(rest)))
    if head == "at":
        return OnceSchedule(_at(rest, now))
    if head == "every":
        return IntervalSchedule(parse_interval(rest, minimum=min_interval))
    if head == "cron":
        text = rest
    return parse_cron(text, tz=tz, minimum=min_interval)


def split_schedule(words: list[str]) -> tuple[str, list[str]]:
    """(schedule, prompt words) of ``SCHEDULE PROMPT…`` without quotes: the schedule's length
    follows from its first word (``in 10m``, ``every 90 minutes``, ``at <time>``, ``@daily``,
    ``[cron] [TZ=zone] <five fields>``), and a word ``exact`` after it. A first word with spaces
    in it is the whole schedule."""
    if not words:
        raise CommandError(f"A job needs a schedule and a prompt — {FORMS}.")
    if " " in words[0].strip():
        return words[0], words[1:]
    n = _schedule_words(words)
    if len(words) > n and words[n].lower() == EXACT:
        n += 1
    return " ".join(words[:n]), words[n:]


def _schedule_words(words: list[str]) -> int:
    head = words[0].lower()
    if head in ("in", "every"):
        glued = len(words) > 1 and not words[1].replace(".", "", 1).isdigit()
        return 2 if glued else 3
    if head == "at" or head.startswith("@"):
        return 2 if head == "at" else 1
    n = 1 if head == "cron" else 0
    if len(words) > n and words[n].lower().startswith("tz="):
        n += 1
    if len(words) > n and words[n].startswith("@"):
        return n + 1
    return n + 5


def _delay(text: str) -> int:
    # A one-shot waits any whole number of seconds: the minimum binds what repeats.
    return parse_interval(text, minimum=1)


def _at(text: str, now: datetime) -> datetime:
    try:
        moment = datetime.fromisoformat(text.strip())
    except ValueError:
        raise CommandError(
            f"{quote(text) if text else 'Nothing'} is not an ISO 8601 time — write it with its "
            "offset, like at 2027-01-05T09:00+01:00 or at 2027-01-05T08:00Z."
        ) from None
    if moment.tzinfo is None:
        raise CommandError(
            f"{quote(text)} has no UTC offset — add one (+01:00, Z) so the time is not a guess."
        )
    moment = moment.astimezone(UTC)
    if moment <= now:
        raise CommandError(f"{quote(text)} is in the past — give a time after now.")
    return moment


def job_next_fire(schedule: JobSchedule, anchor: datetime, fired: int) -> datetime | None:
    """The next due time after ``anchor`` (aware UTC); None when a one-shot has run."""
    anchor = anchor.replace(tzinfo=UTC) if anchor.tzinfo is None else anchor.astimezone(UTC)
    if isinstance(schedule, OnceSchedule):
        return schedule.at if fired == 0 else None
    if isinstance(schedule, IntervalSchedule):
        return anchor + timedelta(seconds=schedule.seconds)
    return cron_next(schedule, anchor)


def describe_job_schedule(schedule: JobSchedule) -> str:
    if isinstance(schedule, IntervalSchedule):
        return f"every {format_interval(schedule.seconds)}"
    return schedule.describe()
