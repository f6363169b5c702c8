"""Jitter for cron jobs: the heartbeats' offset (sessions/jitter.py) drawn from the job id —
bounded, the same in every process, kept once per phase for an interval, at every occurrence
for cron; one-shots and ``exact`` jobs run on their exact times, and HBGW_JITTER=false marks
every job added as exact. The choice lives in the stored schedule text (its last word)."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest
from support.cli_fixtures import Hbgw
from support.seed import T0

from hbgw.core.clock import iso
from hbgw.sessions import jobs
from hbgw.sessions.cron_commands import handle_cron
from hbgw.sessions.grammar import CronSchedule, GrammarLimits, IntervalSchedule
from hbgw.sessions.grammar.job_schedule import (
    JobSchedule,
    OnceSchedule,
    is_exact,
    parse_job_schedule,
    split_schedule,
)
from hbgw.sessions.jitter import jitter_offset
from hbgw.sessions.states import JobStatus, MissedPolicy
from hbgw.sessions.store import Store

IDS = [f"j{n:011x}" for n in range(2000)]
TOP = datetime(2026, 11, 29, 13, 0, tzinfo=UTC)


def job(schedule: JobSchedule, seed: str) -> jobs.JobState:
    state = jobs.new_job(
        schedule=schedule, prompt="p", times=None, missed_policy=MissedPolicy.COALESCE, now=T0
    )
    return replace(state, jitter_seed=seed)


CAPS = [(IntervalSchedule(600), 60), (IntervalSchedule(86400), 300), (CronSchedule("@hourly"), 300)]


@pytest.mark.parametrize(("schedule", "cap"), CAPS)
def test_offsets_stay_within_ten_percent_and_five_minutes(schedule: JobSchedule, cap: int) -> None:
    exact = job(schedule, "").next_due()
    assert exact is not None
    offsets = [(job(schedule, j).next_due() or exact) - exact for j in IDS]
    assert min(offsets) >= timedelta(0) and max(offsets) <= timedelta(seconds=cap)
    assert len(set(offsets)) > cap // 2  # spread, not bunched


def test_the_same_job_gets_the_same_offset_in_another_process() -> None:
    code = "from sessions.jitter import jitter_offset; print(jitter_offset('j0123', 3600).seconds)"
    other = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert int(other.stdout) == jitter_offset("j0123", 3600).seconds
    assert (
        job(CronSchedule("@hourly"), "j0123").next_due()
        == job(CronSchedule("@hourly"), "j0123").next_due()
    )


def test_an_interval_job_keeps_its_phase_and_a_resume_staggers_again() -> None:
    first = job(IntervalSchedule(3600), "j-phase")
    due = first.next_due()
    offset = jitter_offset("j-phase", 3600)
    assert due == T0 + timedelta(hours=1) + offset
    ran = jobs.reserve(first, due)
    assert ran.next_due() == due + timedelta(hours=1)  # the offset is not added again
    later = due + timedelta(minutes=10)
    resumed = jobs.resume(jobs.pause(ran, "j", later), "j", later)
    assert resumed.next_due() == later + timedelta(hours=1) + offset


def test_hourly_jobs_at_the_top_of_the_hour_are_staggered_at_every_occurrence() -> None:
    hourly = CronSchedule("@hourly")
    dues = {job(hourly, j).next_due() for j in IDS[:500]}
    assert all(d is not None and TOP <= d <= TOP + timedelta(minutes=5) for d in dues)
    assert len(dues) > 200
    state = job(hourly, "j-cron")
    due = state.next_due()
    assert due == TOP + jitter_offset("j-cron", 3600)
    nxt = jobs.reserve(state, due).next_due()
    assert nxt == TOP + timedelta(hours=1) + jitter_offset("j-cron", 3600)


def test_one_shots_and_exact_jobs_run_on_their_exact_times() -> None:
    at = T0 + timedelta(minutes=10)
    assert job(OnceSchedule(at), "j-once").next_due() == at
    assert job(IntervalSchedule(3600), "").next_due() == T0 + timedelta(hours=1)


def test_exact_is_the_last_word_of_the_schedule() -> None:
    assert split_schedule(["every", "1h", "exact", "check", "the", "disk"]) == (
        "every 1h exact",
        ["check", "the", "disk"],
    )
    assert split_schedule(["@hourly", "exact", "report"]) == ("@hourly exact", ["report"])
    assert parse_job_schedule("TZ=Europe/Paris 0 9 * * 1-5 exact", now=T0, min_interval=60) == (
        CronSchedule("0 9 * * 1-5", "Europe/Paris")
    )
    assert is_exact("every 1h EXACT") and not is_exact("every 1h")


def _added(store: Store, text: str, limits: GrammarLimits) -> dict[str, object]:
    session = store.sessions.get_session(
        store.sessions.create_session(platform="slack", chat="C1", now=T0).id
    )
    answer = handle_cron(store.jobs, session, text, T0, limits)
    assert answer.changed is not None, answer.text
    found = store.jobs.job(answer.changed)
    assert found.status == JobStatus.ACTIVE
    return found.to_json()


def test_cron_in_a_chat_is_jittered_unless_exact_or_jitter_is_off(store: Store) -> None:
    jittered = _added(store, "/cron add @hourly -- report", GrammarLimits())
    offset = jitter_offset(str(jittered["id"]), 3600)
    assert (jittered["exact"], jittered["next_due_at"]) == (False, iso(TOP + offset))
    exact = _added(store, "/cron add @hourly exact -- report", GrammarLimits())
    assert (exact["exact"], exact["next_due_at"]) == (True, "2026-11-29T13:00:00Z")
    off = _added(store, "/cron add @hourly -- report", GrammarLimits(jitter=False))
    assert (off["exact"], off["schedule_text"]) == (True, "@hourly exact")


def test_cron_add_exact_on_the_command_line(hbgw: Hbgw) -> None:
    sid = hbgw("session", "create", "--platform", "slack", "--chat", "C1").out.strip()
    added = hbgw("cron", "add", "--session", sid, "--exact", "--json", "@hourly", "--", "report")
    assert added.code == 0, added.err
    body = json.loads(added.out)
    assert (body["exact"], body["schedule_text"]) == (True, "@hourly exact")
    assert body["next_due_at"].endswith(":00:00Z")
