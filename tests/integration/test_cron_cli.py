"""`hbgw cron …` as a user types it: add, list, show, pause, resume, cancel (twice), runs, and
every refusal one sentence with exit 2 and nothing stored."""

from __future__ import annotations

import json

import pytest
from support.cli_fixtures import Hbgw


def _session(hbgw: Hbgw) -> str:
    return hbgw("session", "create", "--platform", "slack", "--chat", "C1").out.strip()


def test_cron_walkthrough(hbgw: Hbgw) -> None:
    sid = _session(hbgw)
    added = hbgw("cron", "add", "--session", sid, "--json", "every", "2h", "--", "check", "CI")
    assert added.code == 0, added.err
    job = json.loads(added.out)
    assert (job["status"], job["interval_seconds"], job["prompt"]) == ("active", 7200, "check CI")
    assert job["session_id"] == sid and job["next_due_at"].endswith("Z")
    jid = job["id"]

    routed = hbgw(
        "cron",
        "add",
        "--platform",
        "slack",
        "--chat",
        "C2",
        "--tz",
        "Europe/Paris",
        "--times",
        "3",
        "--model",
        "small",
        "0 9 * * 1-5",
        "--",
        "stand-up",
    )
    assert routed.code == 0, routed.err
    assert (
        routed.out.startswith("⏰ Cron job j") and "cron 0 9 * * 1-5 (Europe/Paris)" in routed.out
    )

    once = hbgw("cron", "add", "--session", sid, "in", "10m", "--", "remind", "me")
    assert "once at" in once.out

    listed = json.loads(hbgw("cron", "list", "--json").out)
    assert [j["prompt"] for j in listed] == ["check CI", "stand-up", "remind me"]
    assert listed[1]["times"] == 3 and listed[1]["model"] == "small"
    assert "stand-up" in hbgw("cron", "list").out
    assert "prompt: check CI" in hbgw("cron", "show", jid).out

    assert "paused" in hbgw("cron", "pause", jid).out
    again = hbgw("cron", "pause", jid)
    assert again.code == 2 and "already paused" in again.err
    assert "resumed" in hbgw("cron", "resume", jid).out
    assert "cancelled" in hbgw("cron", "cancel", jid).out
    twice = hbgw("cron", "cancel", jid)
    assert twice.code == 2 and "already cancelled" in twice.err and "no cron job" not in twice.err
    assert f"No runs of cron job {jid} yet." in hbgw("cron", "runs", jid).out
    assert json.loads(hbgw("cron", "runs", jid, "--json").out) == []


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["1-2-3", "*", "*", "*", "*", "--", "x"], "minute field"),
        (["*", "1-2-3", "*", "*", "*", "--", "x"], "hour field"),
        (["every", "10s", "--", "x"], "minimum"),
        (["*/0 * * * *", "--", "x"], "step must be at least 1"),
        (["at", "2020-01-01T00:00+00:00", "--", "x"], "in the past"),
        (["at", "2030-01-01T09:00", "--", "x"], "no UTC offset"),
        (["in", "soon", "--", "x"], "not an interval"),
        (["every", "2h", "--"], "prompt is required"),
        (["--times", "0", "every", "2h", "--", "x"], "--times"),
        (["--missed", "later", "every", "2h", "--", "x"], "coalesce or skip"),
        (["--tz", "Europe/Paris", "every", "2h", "--", "x"], "--tz only applies"),
        (["--tz", "Mars/Base", "0 9 * * *", "--", "x"], "Unknown timezone"),
    ],
)
def test_bad_input_is_one_sentence_and_stores_nothing(
    hbgw: Hbgw, args: list[str], words: str
) -> None:
    sid = _session(hbgw)
    result = hbgw("cron", "add", "--session", sid, *args)
    assert result.code == 2, (result.out, result.err)
    assert words in result.err
    assert json.loads(hbgw("cron", "list", "--json").out) == []


def test_a_job_needs_one_target_and_an_existing_session(hbgw: Hbgw) -> None:
    none = hbgw("cron", "add", "every", "2h", "--", "x")
    assert none.code == 2 and "needs a target" in none.err
    both = hbgw("cron", "add", "--session", "s1", "--chat", "C", "every", "2h", "--", "x")
    assert both.code == 2 and "one target" in both.err
    missing = hbgw("cron", "add", "--session", "snope", "every", "2h", "--", "x")
    assert missing.code == 2 and "no session" in missing.err
    unknown = hbgw("cron", "show", "jnope")
    assert unknown.code == 2 and "no cron job" in unknown.err
    assert json.loads(hbgw("cron", "list", "--json").out) == []
