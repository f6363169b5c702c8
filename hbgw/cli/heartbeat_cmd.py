"""`hbgw heartbeat …`: the /heartbeat commands, for operators and scripts.

``set`` reads its options with the /heartbeat grammar (``option_schedule``), so a schedule is
accepted or refused, in the same words, whichever way it is given.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any

import typer

from hbgw.cli.common import limits, now, open_store, out, out_json, settings
from hbgw.cli.gateway_ctx import sync_index
from hbgw.cli.help import Command, Group
from hbgw.core.clock import utcnow

if TYPE_CHECKING:
    from hbgw.sessions.grammar import Command as HeartbeatCommand
    from hbgw.sessions.grammar.policy import Policy

app = typer.Typer(
    cls=Group,
    help="Show, set, pause, resume or clear the heartbeat of a session; an owner's default budget.",
)

SESSION = typer.Argument(..., metavar="SESSION", help="Session id.")
BUDGET = typer.Option(
    None, "--budget", metavar="TOKENS", help="Tokens per UTC day, such as 50k; then it pauses."
)
MODEL = typer.Option(
    None, "--model", metavar="NAME", help="Its turns' model, one of HBGW_ALLOWED_MODELS."
)
CLI_EXAMPLE = "for example: hbgw heartbeat set SESSION --every 10m check CI"
DEDUPE_HELP = "Hold back a reply repeated within this window (default HBGW_DEDUPE; 0: off)."
BACKOFF_HELP = "Quiet fires double the interval up to this ceiling, such as 4h."


@app.command(cls=Command)
def status(
    session_id: str = SESSION,
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """Prompt, schedule, next fire time, fires so far and last outcome."""
    from dataclasses import replace

    from hbgw.sessions import replies

    estop, busy, at = _from_redis(session_id)  # None: no Redis answers, so nobody knows
    store = open_store()
    try:
        shown = replace(store.heartbeats.heartbeat_status(session_id, at), busy=busy)
    finally:
        store.close()
    if as_json:
        out_json({**shown.to_json(), "emergency_stop": estop})
    else:
        out(replies.status_reply(shown, estop=bool(estop)))


class _NoGauge:
    """A command's clock offset is said on stderr when large, never exported (no metrics)."""

    def set(self, value: float) -> None:
        pass


def _from_redis(session_id: str) -> tuple[bool | None, bool | None, datetime]:
    """Whether an emergency stop holds the session and whether a turn does (or messages wait
    for one), as the API's status reads them (``TurnGate``), and the time now by the shared
    clock; (None, None, this host's time) when no Redis answers."""
    from hbgw.cli.gateway_ctx import reachable_redis
    from hbgw.state.connection import TRANSIENT_REDIS_ERRORS
    from hbgw.state.keys import Keys
    from hbgw.state.shared_clock import shared_clock
    from hbgw.state.turn_gate import TurnGate

    s = settings()
    client = reachable_redis(s)
    if client is None:
        return None, None, utcnow()
    try:
        gate = TurnGate(client, Keys(s.namespace))
        return (
            gate.estop_active(session_id),
            not gate.is_idle(session_id),
            shared_clock(client, s, gauge=_NoGauge())(),
        )
    except TRANSIENT_REDIS_ERRORS:
        return None, None, utcnow()  # lost half way: as if it never answered
    finally:
        client.close()


@app.command("set", cls=Command)
def set_(
    session_id: str = SESSION,
    prompt: list[str] = typer.Argument(..., metavar="PROMPT…", help="The recurring instruction."),
    every: str | None = typer.Option(
        None, "--every", metavar="INTERVAL", help="Interval such as 10m, 1.5h or '90 minutes'."
    ),
    cron: str | None = typer.Option(
        None, "--cron", metavar="EXPR", help="Five cron fields, or @hourly, @daily, … (in quotes)."
    ),
    tz: str | None = typer.Option(
        None,
        "--tz",
        metavar="ZONE",
        help="IANA timezone of --cron and --hours, such as Europe/Paris.",
    ),
    hours: str | None = typer.Option(
        None, "--hours", metavar="HH:MM-HH:MM", help="Active hours (in --tz, else UTC)."
    ),
    weekdays: bool = typer.Option(False, "--weekdays", help="Only Monday to Friday."),
    exact: bool = typer.Option(False, "--exact", help="No jitter: fire on the exact times."),
    lasts: str | None = typer.Option(
        None, "--for", metavar="DURATION", help="End this long after it is set, such as 7d."
    ),
    times: int | None = typer.Option(None, "--times", metavar="N", help="End after N fires."),
    budget: str | None = BUDGET,
    model: str | None = MODEL,
    dedupe: str | None = typer.Option(None, "--dedupe", metavar="DURATION", help=DEDUPE_HELP),
    backoff: str | None = typer.Option(None, "--backoff", metavar="DURATION", help=BACKOFF_HELP),
) -> None:
    """Set (or replace) the heartbeat: fire count 0, fresh anchor.

    Without --every or --cron it fires every HBGW_DEFAULT_INTERVAL; policies: docs/contract.md.
    """
    from hbgw.sessions.grammar import IntervalSchedule, SetHeartbeat, check_prompt, option_schedule
    from hbgw.sessions.grammar.policy import policy_words

    lim = limits()
    chosen: dict[str, Any] = {"lasts": lasts, "times": times, "budget": budget, "model": model}
    chosen |= {"dedupe": dedupe, "backoff": backoff, "hours": hours, "weekdays": weekdays}
    words = policy_words(exact=exact, **chosen)
    policy = _policy(words, tz, budget)
    # With an interval, --tz can only be the active hours' zone.
    schedule_tz = None if cron is None and policy.hours is not None else tz
    schedule = option_schedule(every=every, cron=cron, tz=schedule_tz, limits=lim)
    text = check_prompt(" ".join(prompt), lim, example=CLI_EXAMPLE)
    if schedule is None:
        schedule = IntervalSchedule(lim.default_interval)
        every = f"{lim.default_interval}s" if words else None
    written = _schedule_text(every, cron, tz, words) if every or cron else ""
    _apply(session_id, SetHeartbeat(schedule, text, written, policy))


@app.command(cls=Command)
def pause(session_id: str = SESSION) -> None:
    """Stop firing but keep the heartbeat."""
    from hbgw.sessions.grammar import Pause

    _apply(session_id, Pause())


@app.command(cls=Command)
def resume(session_id: str = SESSION) -> None:
    """Fire again; the clock re-anchors to now (no instant catch-up)."""
    from hbgw.sessions.grammar import Resume

    _apply(session_id, Resume())


@app.command(cls=Command)
def clear(session_id: str = SESSION) -> None:
    """Remove the heartbeat (kept as cleared for audit, never restored)."""
    from hbgw.sessions.grammar import Clear

    _apply(session_id, Clear())


@app.command("budget", cls=Command)
def budget_(
    tokens: str | None = typer.Argument(
        None, metavar="[TOKENS|off]", help="The default, such as 50k; off removes it; none: show."
    ),
    owner: str | None = typer.Option(
        None, "--owner", help="Whose default (default: the owner of `hbgw up`'s API token)."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """Show or set an owner's default token budget per UTC day.

    It caps each of the owner's heartbeats that names no budget of its own, at once; a
    heartbeat's own budget comes first, HBGW_HEARTBEAT_DAILY_TOKENS last.
    """
    from hbgw.local_api import local_owner
    from hbgw.sessions import replies
    from hbgw.sessions.grammar.costs import parse_default_budget

    s = settings()
    who = owner if owner is not None else local_owner(s)
    store = open_store()
    if tokens is None:
        result = store.heartbeats.owner_budget(who)
    else:
        chosen = parse_default_budget(tokens)
        result = store.heartbeats.set_owner_budget(who, chosen, s.heartbeat_daily_tokens, now())
    if as_json:
        out_json({**result.to_json(), "operator_daily_tokens": s.heartbeat_daily_tokens})
    else:
        out(replies.owner_budget_reply(result, s.heartbeat_daily_tokens))


def _policy(words: str, tz: str | None, budget: str | None) -> Policy:
    """The policy options, read by the /heartbeat grammar with the operator's limits."""
    from hbgw.sessions.grammar.costs import parse_budget
    from hbgw.sessions.grammar.policy import parse_policy

    if budget is not None:
        parse_budget(budget)  # its own sentence: the words would read it as the prompt's start
    return parse_policy(words, tz=tz, limits=limits())


def _apply(session_id: str, command: HeartbeatCommand) -> None:
    from hbgw.sessions.heartbeat_commands import apply_command

    out(apply_command(open_store().heartbeats, session_id, command, now()))
    sync_index(session_id)


def _schedule_text(every: str | None, cron: str | None, tz: str | None, words: str) -> str:
    """The options as the equivalent /heartbeat text: what the user wrote for the schedule."""
    parts = [f"--every {every}"] if every is not None else [f'--cron "{cron}"']
    if tz is not None:
        parts.append(f"--tz {tz}")
    parts.append(words)
    return " ".join(" ".join(parts).split())
