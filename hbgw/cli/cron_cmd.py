"""`hbgw cron …`: standalone scheduled prompts (cron jobs), any number per owner.

``add SCHEDULE -- PROMPT…``: the schedule is ``in 10m``, ``at <ISO 8601 with offset>``,
``every <interval>``, five cron fields (``--tz`` for their zone) or an @alias; its runs go to
``--session SID`` (turns in that conversation) or, each in a fresh session, to the route
``--platform``/``--chat``/``--thread``.
"""

from __future__ import annotations

import typer

from hbgw.cli.common import limits, now, open_store, out, out_json
from hbgw.cli.gateway_ctx import gateway_runtime
from hbgw.cli.help import Command, Group

app = typer.Typer(cls=Group, help="Add, list, show, pause, resume or cancel cron jobs.")

JOB = typer.Argument(..., metavar="JOB", help="Job id (hbgw cron list shows them).")
OWNER = typer.Option(None, "--owner", help="Only this owner's jobs (and make new ones theirs).")
JSON = typer.Option(False, "--json", help="Print JSON.")


@app.command(cls=Command)
def add(
    words: list[str] = typer.Argument(
        ..., metavar="SCHEDULE -- PROMPT…", help="When, then what: in 10m -- remind me."
    ),
    session: str | None = typer.Option(None, "--session", metavar="SID", help="Run in it."),
    platform: str | None = typer.Option(None, "--platform", help="A fresh session per run here."),
    chat: str | None = typer.Option(None, "--chat", help="Chat of the fresh sessions."),
    thread: str | None = typer.Option(None, "--thread", help="Thread of the fresh sessions."),
    times: int | None = typer.Option(None, "--times", min=1, help="Run at most N times."),
    model: str | None = typer.Option(None, "--model", help="The model its runs ask for."),
    tz: str | None = typer.Option(None, "--tz", metavar="ZONE", help="IANA zone of a cron."),
    exact: bool = typer.Option(False, "--exact", help="No jitter: run on the exact times."),
    missed: str = typer.Option(
        "coalesce", "--missed", metavar="POLICY", help="coalesce (one run) or skip."
    ),
    owner: str | None = OWNER,
    as_json: bool = JSON,
) -> None:
    """Add a job; nothing is stored when any part is refused."""
    from hbgw.core.errors import BadInput
    from hbgw.sessions.grammar import check_prompt
    from hbgw.sessions.grammar.job_schedule import exact_text, parse_job_schedule, split_schedule
    from hbgw.sessions.states import MissedPolicy
    from hbgw.sessions.views import JobRoute, NewJob

    lim, at = limits(), now()
    schedule_text, prompt_words = split_schedule(words)
    schedule = parse_job_schedule(schedule_text, now=at, min_interval=lim.min_interval, tz=tz)
    prompt = check_prompt(" ".join(prompt_words), lim, example="hbgw cron add in 10m -- remind me")
    if missed not in {p.value for p in MissedPolicy}:
        raise BadInput(f"--missed is coalesce or skip, not {missed!r}.")
    route = JobRoute(session, platform, chat, thread)
    schedule_text = exact_text(schedule_text, schedule, exact or not lim.jitter)
    new = NewJob(schedule, schedule_text, prompt, route, owner, model, times, MissedPolicy(missed))
    job = open_store().jobs.create_job(new, at)
    _sync(job.id)
    if as_json:
        out_json(job.to_json())
    else:
        out(f"⏰ Cron job {job.id} added ({_when(job)}): {prompt}")


@app.command("list", cls=Command)
def list_(owner: str | None = OWNER, as_json: bool = JSON) -> None:
    """Every job (or one owner's), oldest first."""
    from hbgw.sessions.store.job_records import JOB_PAGE

    store, jobs, after = open_store(), [], None
    while True:  # every page: the operator sees them all, however many
        page = store.jobs.jobs(owner=owner, after=after)
        jobs += page
        if len(page) < JOB_PAGE:
            break
        after = page[-1].id
    if as_json:
        out_json([j.to_json() for j in jobs])
        return
    if not jobs:
        out("No cron jobs yet — add one with hbgw cron add in 10m -- remind me --session SID.")
        return
    out(f"{'job':<13} {'status':<10} {'runs':>4}  {'next':<26} {'target':<24} prompt")
    for j in jobs:
        data = j.to_json()
        target = j.route.session_id or f"{j.route.platform}:{j.route.chat}"
        out(
            f"{j.id:<13} {j.status:<10} {j.state.fire_count:>4}  {data['next_due_at'] or '-':<26} "
            f"{target:<24} {j.state.prompt[:60]}"
        )


@app.command(cls=Command)
def show(job_id: str = JOB, as_json: bool = JSON) -> None:
    """A job's schedule, target, state, runs so far and next time."""
    job = open_store().jobs.job(job_id)
    if as_json:
        out_json(job.to_json())
        return
    for key, value in job.to_json().items():
        if value is not None:
            out(f"{key}: {value}")


@app.command(cls=Command)
def pause(job_id: str = JOB) -> None:
    """Stop running it but keep it."""
    _change(job_id, "pause_job", "paused")


@app.command(cls=Command)
def resume(job_id: str = JOB) -> None:
    """Run it again, re-anchored now (no catch-up for the paused time)."""
    _change(job_id, "resume_job", "resumed")


@app.command(cls=Command)
def cancel(job_id: str = JOB) -> None:
    """End it for good (kept as cancelled; cancelling it again says so)."""
    _change(job_id, "cancel_job", "cancelled")


@app.command(cls=Command)
def runs(job_id: str = JOB, as_json: bool = JSON) -> None:
    """The job's runs in the ledger: state, session, tokens and delivery."""
    from hbgw.cli.common import aligned, delivery_cell, delivery_error
    from hbgw.core.clock import iso

    rows = open_store().jobs.job_runs(job_id)
    if as_json:
        out_json([r.to_json() for r in rows])
        return
    if not rows:
        out(f"No runs of cron job {job_id} yet.")
        return
    table = [["fire id", "state", "session", "reserved", "tokens in+out", "delivery"]]
    details = ["detail"]
    for r in rows:
        usage = r.usage
        tokens = f"{usage.prompt_tokens}+{usage.completion_tokens}" if usage else "-"
        reserved = iso(r.reserved_at) or ""
        table.append([r.fire_id, str(r.state), r.session_id, reserved, tokens])
        table[-1].append(delivery_cell(r.delivery))
        details.append(r.detail or delivery_error(r.delivery))
    aligned(table, details)


def _change(job_id: str, method: str, verb: str) -> None:
    job = getattr(open_store().jobs, method)(job_id, now())
    _sync(job_id)
    out(f"⏰ Cron job {job.id} {verb} ({_when(job)}).")


def _when(job: object) -> str:
    data = job.to_json()  # type: ignore[attr-defined]
    schedule, due = data["schedule"], data["next_due_at"]
    return f"{schedule}, next at {due}" if due else f"{schedule}, {data['status']}"


def _sync(job_id: str) -> None:
    """Tell the due index (when Redis is reachable; the restore pass does it otherwise)."""
    with gateway_runtime() as (_store, rt, _dispatcher):
        if rt is not None:
            rt.due.settle_job(job_id)
