"""The /cron slash command: cron jobs that deliver to the chat it is written in.

``/cron add SCHEDULE -- PROMPT`` (the ``--`` may be left out: the schedule's length follows from
its first word, as for ``hbgw cron add``), ``/cron list`` (also a bare ``/cron``), ``/cron show
ID``, ``/cron pause ID``, ``/cron resume ID``, ``/cron cancel ID`` and ``/cron help``. SCHEDULE is
any form ``hbgw cron add`` takes (``job_schedule``): ``in 10m``, ``at <ISO 8601 with offset>``,
``every 2h``, five cron fields with ``TZ=Area/City`` in front, or an @alias. Pure: ``now`` is an
argument; every failure is a GrammarError whose sentence names what to change.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime

from hbgw.core.errors import CommandError
from hbgw.sessions.grammar.job_schedule import (
    FORMS,
    JobSchedule,
    exact_text,
    parse_job_schedule,
    split_schedule,
)
from hbgw.sessions.grammar.limits import GrammarLimits
from hbgw.sessions.grammar.slash import check_command_length, check_prompt
from hbgw.sessions.grammar.text import quote

EXAMPLE = "for example: /cron add in 10m -- remind me to deploy"
_HEAD = re.compile(r"\s*/cron(?:@[A-Za-z0-9_]+)?(?=\s|$)", re.IGNORECASE)
_JOB_ID = re.compile(r"j[0-9a-f]{11}")
ID_VERBS = ("show", "pause", "resume", "cancel")


@dataclass(frozen=True)
class AddJob:
    schedule: JobSchedule
    schedule_text: str
    prompt: str


@dataclass(frozen=True)
class ListJobs:
    pass


@dataclass(frozen=True)
class CronHelp:
    pass


@dataclass(frozen=True)
class JobVerb:
    """``show``, ``pause``, ``resume`` or ``cancel`` of one job."""

    verb: str
    job_id: str


CronCommand = AddJob | ListJobs | CronHelp | JobVerb


def is_cron_command(text: str) -> bool:
    """True when ``text`` starts with /cron as a whole word (/cron@Bot too)."""
    return _HEAD.match(text) is not None


def cron_help() -> str:
    return "\n".join(
        [
            "/cron runs a standalone prompt on a schedule, each run a fresh conversation whose "
            "reply comes to this chat (use /heartbeat when it needs this conversation):",
            "/cron add in 10m -- <prompt> — once (also at 2027-01-05T09:00+01:00)",
            "/cron add every 2h -- <prompt> — repeating (also @daily, or five cron fields "
            "with a zone: TZ=Europe/Paris 0 9 * * 1-5); staggered by a few seconds unless "
            "the schedule ends with exact: /cron add @hourly exact -- <prompt>",
            "/cron list — this chat's jobs; /cron show ID, /cron pause ID, /cron resume ID, "
            "/cron cancel ID",
        ]
    )


def parse_cron_command(text: str, now: datetime, limits: GrammarLimits) -> CronCommand:
    """Parse one /cron command line; ``now`` (aware datetime) anchors ``in`` and ``at``."""
    check_command_length(text, limits, "/cron")
    head = _HEAD.match(text)
    if head is None:
        raise CommandError(f"That is not a /cron command — start with /cron, {EXAMPLE}.")
    words = text[head.end() :].split()
    if not words:
        return ListJobs()
    verb, args = words[0].lower(), words[1:]
    if verb in ("list", "help"):
        if args:
            raise CommandError(f"'/cron {verb}' takes nothing after it.")
        return ListJobs() if verb == "list" else CronHelp()
    if verb in ID_VERBS:
        return JobVerb(verb, _job_id(verb, args))
    if verb == "add":
        return _add(args, now, limits)
    raise CommandError(
        f"{quote(words[0])} is not a /cron command — use add, list, show, pause, resume or "
        f"cancel, {EXAMPLE}."
    )


def _job_id(verb: str, args: list[str]) -> str:
    if not args:
        raise CommandError(f"'/cron {verb}' needs a job id — /cron list shows this chat's jobs.")
    if len(args) > 1:
        raise CommandError(f"'/cron {verb}' takes one job id, like /cron {verb} {args[0]}.")
    if _JOB_ID.fullmatch(args[0]) is None:
        raise CommandError(
            f"{quote(args[0])} is not a job id — ids look like j3f9a0c1b2d4e; /cron list "
            "shows this chat's jobs."
        )
    return args[0]


def _add(args: list[str], now: datetime, limits: GrammarLimits) -> AddJob:
    if not args:
        raise CommandError(f"'/cron add' needs a schedule and a prompt — {EXAMPLE}.")
    if "--" in args:
        cut = args.index("--")
        schedule_words, prompt_words = args[:cut], args[cut + 1 :]
        if not schedule_words:
            raise CommandError(f"The schedule goes before -- ({FORMS}); {EXAMPLE}.")
        schedule_text = " ".join(schedule_words)
    else:
        schedule_text, prompt_words = split_schedule(args)
    schedule = parse_job_schedule(schedule_text, now=now, min_interval=limits.min_interval)
    prompt = check_prompt(" ".join(prompt_words), limits, example=EXAMPLE)
    return AddJob(schedule, exact_text(schedule_text, schedule, not limits.jitter), prompt)
