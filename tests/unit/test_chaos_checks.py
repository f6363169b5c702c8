"""The chaos harness's own checks, fed constructed evidence: each defect is flagged, a clean run
passes, and what the design tolerates (a SIGKILLed turn left started, a send cut off from its
commit by a kill) is not a failure; a send again is tolerated only when marked repeat. (The
harness's own Redis proxy is tested in test_chaos_proxy.py.)"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from chaos import recheck
from chaos.checks import Check, run_checks
from chaos.evidence import (
    Attempt,
    Delivery,
    Disruption,
    Evidence,
    Heartbeat,
    ProcessExit,
    Reply,
    Run,
    UserMessage,
)
from chaos.recovery import recovery

T = 1_000_000.0  # an epoch second; the fake run lasts from T to T + 60
S = "s1"


def _run(n: int, fence: int, at: float, state: str = "completed", worker: str = "w1") -> Run:
    """A heartbeat's fire; its id names its due time in ms, as the beat makes it."""
    return Run(f"{S}:{int(at * 1000)}", S, fence, state, at, at + 0.01, at + 0.3, worker)


def clean() -> Evidence:
    """A session firing every 2 s for a minute, one user message between two fires."""
    runs = [_run(i, i, T + 2 * i) for i in range(1, 30)]
    sends = [Delivery("send", S, r.reserved + 0.2, "heartbeat", ref=r.fire_id) for r in runs]
    user = [
        Delivery("typing", S, T + 3.0, reply_to="7"),
        Delivery("send", S, T + 3.3, "reply", reply_to="7"),
    ]
    return Evidence(
        runs=runs,
        messages=[UserMessage(7, S, "done", T + 2.9)],
        replies=[Reply(8, S, 7, T + 3.31)],
        deliveries=sends + user,
        heartbeats=[Heartbeat(S, 2.0, T)],
        faults=[Disruption("worker_kill", "w2", T + 1, T + 4)],
        accepted=[7],
        expected_faults=["worker_kill"],
        snapshot=T + 60,
        grace=5.0,
        allowance=3.0,
        attempts=[Attempt("slack session on C0VICTIM", 403, "Owner mallory may not …", True)],
    )


def failing(ev: Evidence) -> dict[str, Check]:
    return {c.name: c for c in run_checks(ev) if not c.ok}


def test_a_clean_run_passes() -> None:
    assert failing(clean()) == {}


def test_a_fire_delivered_twice_is_a_duplicate_and_an_unmarked_repeat() -> None:
    ev = clean()
    ev.deliveries.append(replace(ev.deliveries[3], at=ev.deliveries[3].at + 0.05))
    assert set(failing(ev)) == {"no_duplicate_fires", "no_unmarked_repeat"}


def test_a_fire_sent_again_marked_repeat_is_neither() -> None:
    ev = clean()
    again = replace(ev.deliveries[3], at=ev.deliveries[3].at + 0.05, repeat=True)
    ev.deliveries.append(again)
    assert failing(ev) == {}
    repeats = next(c for c in run_checks(ev) if c.name == "no_unmarked_repeat")
    assert repeats.figures["marked_repeats"] == 1


def test_a_stale_turn_delivering_after_a_newer_one_is_an_overlap_and_stale() -> None:
    """The paused worker: its fire stays started and sends after the next turn began."""
    ev = clean()
    stale = replace(ev.runs[4], state="started", finished=None)
    ev.runs[4] = stale
    late = Delivery("send", S, (ev.runs[5].started or 0) + 0.25, "heartbeat", ref=stale.fire_id)
    ev.deliveries = [d for d in ev.deliveries if d.ref != stale.fire_id] + [late]
    failed = failing(ev)
    assert set(failed) == {
        "no_overlapping_turns",
        "no_stale_deliveries",
        "no_unfinished_runs",
        "no_send_after_lock_moved",
    }
    assert any("fence 5" in f and "fence 6" in f for f in failed["no_stale_deliveries"].failures)
    moved = failed["no_send_after_lock_moved"].failures
    assert moved and "(fence 5)" in moved[0] and "fence 6 was granted" in moved[0]


def test_a_queued_message_never_answered_is_lost() -> None:
    ev = clean()
    ev.messages.append(UserMessage(9, S, "queued", T + 20))
    assert failing(ev)["messages_answered_once"].figures["lost"] == 1


def _answered_again(ev: Evidence, *, repeat: bool) -> Evidence:
    """Message 7 sent a second time by a new turn (its own typing signal), 0.4 s later."""
    ev.deliveries += [
        Delivery("typing", S, T + 3.5, reply_to="7"),
        Delivery("send", S, T + 3.7, "reply", reply_to="7", repeat=repeat),
    ]
    return ev


def test_a_message_answered_twice_is_flagged_even_when_a_kill_cut_its_commit() -> None:
    """No window after a kill excuses a second send: only the record's own mark does."""
    ev = _answered_again(clean(), repeat=False)
    ev.faults.append(Disruption("worker_kill", "w1", T + 3.35, T + 6))
    failed = failing(ev)
    assert set(failed) == {"messages_answered_once", "no_unmarked_repeat"}
    assert failed["messages_answered_once"].figures["answered_twice"] == 1
    assert "neither copy marked repeat" in failed["no_unmarked_repeat"].failures[0]


def test_a_message_sent_again_marked_repeat_is_tolerated() -> None:
    ev = _answered_again(clean(), repeat=True)
    assert failing(ev) == {}
    once = next(c for c in run_checks(ev) if c.name == "messages_answered_once")
    assert len(once.tolerated) == 1


def test_the_older_grants_unmarked_copy_may_arrive_after_the_marked_repeat() -> None:
    """A worker paused between its last check and its send delivers late: the newer grant's
    marked copy came first, the unmarked original second. One unmarked copy is the honest case."""
    ev = clean()
    original = next(d for d in ev.deliveries if d.kind == "reply" and d.reply_to == "7")
    ev.deliveries.remove(original)
    ev.deliveries += [
        Delivery("typing", S, original.at - 0.2, reply_to="7"),
        replace(original, repeat=True),
        replace(original, at=original.at + 0.3),
    ]
    assert "no_unmarked_repeat" not in failing(ev)


def test_repeats_are_grouped_by_delivery_key_when_the_channel_writes_one() -> None:
    """Two sends of one key (whatever else they say) are the same message twice."""
    ev = clean()
    first, second = ev.deliveries[5], ev.deliveries[6]
    ev.deliveries[5] = replace(first, delivery_key="k-1")
    ev.deliveries[6] = replace(second, delivery_key="k-1")
    assert set(failing(ev)) == {"no_unmarked_repeat"}
    ev.deliveries[6] = replace(second, delivery_key="k-1", repeat=True)
    assert failing(ev) == {}


def test_a_send_with_nothing_recorded_is_stale() -> None:
    ev = clean()
    ev.deliveries.append(Delivery("send", S, T + 40, "heartbeat", ref=f"{S}:999"))
    assert set(failing(ev)) == {"no_stale_deliveries"}


def test_a_run_left_started_is_unfinished_unless_its_worker_was_killed() -> None:
    ev = clean()
    ev.runs[10] = replace(ev.runs[10], state="started", finished=None)
    ev.deliveries = [d for d in ev.deliveries if d.ref != ev.runs[10].fire_id]
    assert set(failing(ev)) == {"no_unfinished_runs"}
    started = ev.runs[10].started or 0
    ev.faults.append(Disruption("worker_kill", "w1", started + 0.1, started + 3))
    assert failing(ev) == {}


def test_a_refunded_run_with_a_start_is_flagged() -> None:
    ev = clean()
    ev.runs[2] = replace(ev.runs[2], state="refunded", finished=None)
    ev.deliveries = [d for d in ev.deliveries if d.ref != ev.runs[2].fire_id]
    assert "no_refunded_run_started" in failing(ev)


def test_a_heartbeat_that_stops_firing_is_late() -> None:
    ev = clean()
    ev.runs = [r for r in ev.runs if r.reserved < T + 40]
    ev.deliveries = [d for d in ev.deliveries if d.at < T + 40]
    assert set(failing(ev)) == {"heartbeats_on_time"}


def _slow_fires(ev: Evidence, gap: float) -> Evidence:
    """Every fire ``gap`` seconds apart: what a busy machine makes of a 2 s heartbeat."""
    runs = [_run(i, i, T + 5 + gap * i) for i in range(int(54 / gap) + 1)]
    sends = [Delivery("send", S, r.reserved + 0.2, "heartbeat", ref=r.fire_id) for r in runs]
    return replace(ev, runs=runs, deliveries=sends + ev.deliveries[-2:])


def test_a_busy_machine_widens_the_allowance_by_its_load() -> None:
    ev = _slow_fires(clean(), gap=8.0)  # 6 s late each time, over an allowance of 3 s
    assert set(failing(ev)) == {"heartbeats_on_time"}
    busy = replace(ev, load_factor=3.0)  # 9 s allowed
    assert failing(busy) == {}
    on_time = next(c for c in run_checks(busy) if c.name == "heartbeats_on_time")
    assert on_time.figures["allowance_s"] == 9.0
    assert on_time.figures["load_factor"] == 3.0


def test_a_heartbeat_that_stops_firing_fails_however_busy_the_machine() -> None:
    ev = clean()
    ev.runs = [r for r in ev.runs if r.reserved < T + 20]
    ev.deliveries = [d for d in ev.deliveries if d.at < T + 20]
    # A load factor of 50 would allow 150 s; half the 56 s quiet window caps it at 28 s.
    assert set(failing(replace(ev, load_factor=50.0))) == {"heartbeats_on_time"}


def test_a_role_that_exited_is_flagged_and_a_missing_fault_too() -> None:
    ev = clean()
    ev.exits.append(ProcessExit("w2", 4242, 1, T + 10))
    ev.expected_faults.append("redis_full")
    assert set(failing(ev)) == {"no_process_exited", "every_fault_injected"}


def test_in_flight_work_at_the_snapshot_is_not_judged() -> None:
    ev = clean()
    dropped = {r.fire_id for r in ev.runs[-2:]}  # due at T + 56 and T + 58: the two below
    ev.runs = ev.runs[:-2]
    ev.deliveries = [d for d in ev.deliveries if d.ref not in dropped]
    young = Run(f"{S}:{int((T + 56) * 1000)}", S, 100, "started", T + 57, T + 57.1, None, "w1")
    ev.runs.append(young)
    ev.deliveries.append(Delivery("send", S, T + 57.3, "heartbeat", ref=young.fire_id))
    finished_unseen = Run(
        f"{S}:{int((T + 58) * 1000)}", S, 101, "completed", T + 59.5, T + 59.5, T + 59.8, "w1"
    )
    ev.runs.append(finished_unseen)  # finished after the channel file was read
    assert failing(ev) == {}


def test_a_turn_cut_off_before_delivery_sends_nothing_and_that_is_right() -> None:
    ev = clean()
    cut = replace(ev.runs[4], state="failed", detail="lock lost before delivery")
    ev.runs[4] = cut
    ev.deliveries = [d for d in ev.deliveries if d.ref != cut.fire_id]
    assert failing(ev) == {}


def test_a_send_from_a_turn_cut_off_before_delivery_is_stale() -> None:
    ev = clean()
    ev.runs[4] = replace(ev.runs[4], state="failed", detail="lock lost before delivery")
    failed = failing(ev)
    assert set(failed) == {"no_stale_deliveries"}
    assert any("lost the lock" in f for f in failed["no_stale_deliveries"].failures)


# -- a send after its lock moved on ------------------------------------------------------------


def test_a_heartbeat_sent_after_a_newer_fence_was_granted_is_flagged() -> None:
    """The hung worker's send leaves after the next fire of its session was reserved, with a
    newer fence, even though the run finished (nothing else flags it)."""
    ev = clean()
    moved = ev.runs[4]  # fence 5, reserved at T+10; fence 6 is reserved at T+12
    ev.deliveries = [d for d in ev.deliveries if d.ref != moved.fire_id]
    ev.deliveries.append(Delivery("send", S, T + 12.05, "heartbeat", ref=moved.fire_id))
    ev.runs[4] = replace(moved, finished=T + 12.1)
    assert "no_send_after_lock_moved" in failing(ev)


def test_the_records_own_fence_is_the_senders() -> None:
    """A send that carries ``fence`` (the fence branch's channel) is judged by it: a repeat of an
    old fire, sent under the newest grant, is fine; one under an older grant is not."""
    ev = clean()
    resend = Delivery("send", S, T + 12.35, "heartbeat", ref=ev.runs[5].fire_id, repeat=True)
    ev.deliveries.append(replace(resend, fence=6))
    assert failing(ev) == {}
    ev.deliveries[-1] = replace(resend, fence=5)
    assert set(failing(ev)) == {"no_send_after_lock_moved"}


def test_a_user_reply_sent_after_a_fire_was_reserved_during_its_turn_is_flagged() -> None:
    ev = clean()
    ev.deliveries = [d for d in ev.deliveries if d.reply_to != "7"]
    ev.deliveries += [
        Delivery("typing", S, T + 3.0, reply_to="7"),
        Delivery("send", S, T + 4.5, "reply", reply_to="7"),  # fence 2 reserved at T+4
    ]
    failed = failing(ev)
    assert "no_send_after_lock_moved" in failed
    assert "message 7's turn" in failed["no_send_after_lock_moved"].failures[0]


# -- recovery bounded and not growing -----------------------------------------------------------


def _every_second(ev: Evidence, *, stop: float, resume: float) -> Evidence:
    """A 1 s heartbeat that fires every second except from ``stop`` to ``resume``."""
    times = [T + i for i in range(60) if not stop <= T + i < resume]
    runs = [_run(i + 1, i + 1, t) for i, t in enumerate(times)]
    sends = [Delivery("send", S, r.reserved + 0.2, "heartbeat", ref=r.fire_id) for r in runs]
    return replace(
        ev, runs=runs, deliveries=sends, heartbeats=[Heartbeat(S, 1.0, T)], messages=[],
        replies=[], accepted=[], allowance=100.0,
    )  # fmt: skip


def test_a_fault_whose_work_waits_past_the_bound_fails_recovery() -> None:
    ev = _every_second(clean(), stop=T + 3, resume=T + 20)  # 16 s late after the fault's end
    failed = failing(ev)
    assert set(failed) == {"recovery_bounded"}
    assert "over 10.0s" in failed["recovery_bounded"].failures[0]
    assert failing(replace(ev, load_factor=2.0)) == {}  # 20 s allowed on a busy machine


def _repeated_faults(gaps: list[int]) -> Evidence:
    """A Redis restart after each burst of fires; each holds the heartbeat back ``gap`` s."""
    ev = _every_second(clean(), stop=T + 1, resume=T + 2)
    ev.faults, times, at = [], [], T
    for gap in gaps:
        ev.faults.append(Disruption("redis_restart", None, at, at + 1))
        times += [at + 1 + gap + i for i in range(4)]
        at = times[-1] + 0.5
    ev.runs = [_run(i + 1, i + 1, t) for i, t in enumerate(times)]
    ev.deliveries = [
        Delivery("send", S, r.reserved + 0.2, "heartbeat", ref=r.fire_id) for r in ev.runs
    ]
    ev.snapshot, ev.expected_faults = at + 2, ["redis_restart"]
    return ev


def test_recovery_that_grows_over_the_run_fails() -> None:
    failed = failing(_repeated_faults([1, 1, 1, 2, 3, 4, 6, 7, 8]))
    assert set(failed) == {"recovery_bounded"}
    assert "grew over the run" in failed["recovery_bounded"].failures[0]


def test_recovery_that_stays_within_a_lease_is_no_growth() -> None:
    """A fault's recovery varies by up to a lease with where it strikes: 1 s early and 3 s
    late in a run with a 3 s lock lease is noise (the long run of 2026-12-02 saw worker kills
    recover in 0.4 s early and 2.5 s late, all well inside the bound)."""
    assert failing(_repeated_faults([1, 1, 1, 2, 3, 3])) == {}


def test_recovery_that_varies_without_growing_passes() -> None:
    assert failing(_repeated_faults([1, 3, 1, 2, 1, 1, 2, 1, 2])) == {}


def test_a_heartbeat_that_never_fires_after_a_fault_never_recovered() -> None:
    ev = _every_second(clean(), stop=T + 3, resume=T + 61)
    failed = failing(ev)
    assert "never recovered" in failed["recovery_bounded"].failures[0]


def test_recovery_is_measured_up_to_the_next_fault_which_then_answers_for_it() -> None:
    """Work held back past the next fault's start is blamed on the next fault, not this one."""
    ev = _every_second(clean(), stop=T + 5, resume=T + 40)
    ev.faults = [
        Disruption("redis_hang", "w3", T + 1, T + 4),
        Disruption("redis_restarts", None, T + 7, T + 10),
    ]
    ev.expected_faults = ["redis_hang", "redis_restarts"]
    failures = failing(ev)["recovery_bounded"].failures
    assert len(failures) == 1 and failures[0].startswith("fault 2 (redis_restarts)")
    first = recovery(ev, T + 1, T + 4)
    assert first["cut_by_next"] and first["recovered_s"] == 2.0  # due at T+5, cut at T+7


def test_a_run_left_delivering_is_unfinished_unless_its_worker_was_killed() -> None:
    """``delivering`` (fenced, just before the send) is a turn still going: at the snapshot's
    settled past it is as unfinished as ``started``, and it reached the agent."""
    ev = clean()
    ev.runs[10] = replace(ev.runs[10], state="delivering", finished=None)
    ev.deliveries = [d for d in ev.deliveries if d.ref != ev.runs[10].fire_id]
    assert set(failing(ev)) == {"no_unfinished_runs"}
    started = ev.runs[10].started or 0
    ev.faults.append(Disruption("worker_kill", "w1", started + 0.1, started + 3))
    assert failing(ev) == {}


def test_a_message_still_waiting_when_the_next_fault_begins_counts_against_that_fault() -> None:
    """The backlog carries over: a message held back by one fault and still unanswered at the
    end of the next one makes the next one's recovery long, though the first was cut short."""
    ev = clean()
    ev.faults = [
        Disruption("redis_restarts", None, T + 1, T + 4),
        Disruption("pg_restart", None, T + 7, T + 10),
    ]
    ev.expected_faults = ["redis_restarts", "pg_restart"]
    ev.messages.append(UserMessage(9, S, "done", T + 2))
    ev.replies.append(Reply(10, S, 9, T + 30.81))
    ev.accepted.append(9)
    ev.deliveries += [
        Delivery("typing", S, T + 30.5, reply_to="9"),
        Delivery("send", S, T + 30.8, "reply", reply_to="9"),
    ]
    failures = failing(ev)["recovery_bounded"].failures
    assert len(failures) == 1 and failures[0].startswith("fault 2 (pg_restart)")
    second = recovery(ev, T + 7, T + 10)
    assert second["messages_backlog"] == 1 and second["recovered_s"] == 20.81


def test_saved_evidence_reads_back_the_same_for_a_recheck(tmp_path: Path) -> None:
    ev = _answered_again(clean(), repeat=True)
    ev.deliveries.append(replace(ev.deliveries[0], delivery_key="k", fence=1))
    ev.exits.append(ProcessExit("w2", 4242, 1, T + 10))
    recheck.save(ev, tmp_path / "evidence.json")
    assert recheck.load(tmp_path / "evidence.json") == ev
