"""The chaos harness's own checks, fed constructed evidence: each defect is flagged, a clean run
passes, and what the design tolerates (a SIGKILLed turn left started, a send cut off from its
commit by a kill) is not a failure."""

from __future__ import annotations

from dataclasses import replace

from chaos.checks import Check, run_checks
from chaos.evidence import (
    Delivery,
    Disruption,
    Evidence,
    Heartbeat,
    ProcessExit,
    Reply,
    Run,
    UserMessage,
)

T = 1_000_000.0  # an epoch second; the fake run lasts from T to T + 60
S = "s1"


def _run(n: int, fence: int, at: float, state: str = "completed", worker: str = "w1") -> Run:
    return Run(f"{S}:{n}", S, fence, state, at, at + 0.01, at + 0.3, worker)


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
    )


def failing(ev: Evidence) -> dict[str, Check]:
    return {c.name: c for c in run_checks(ev) if not c.ok}


def test_a_clean_run_passes() -> None:
    assert failing(clean()) == {}


def test_a_fire_delivered_twice_is_a_duplicate() -> None:
    ev = clean()
    ev.deliveries.append(replace(ev.deliveries[3], at=ev.deliveries[3].at + 0.05))
    assert set(failing(ev)) == {"no_duplicate_fires"}


def test_a_stale_turn_delivering_after_a_newer_one_is_an_overlap_and_stale() -> None:
    """The paused worker: its fire stays started and sends after the next turn began."""
    ev = clean()
    stale = replace(ev.runs[4], state="started", finished=None)
    ev.runs[4] = stale
    late = Delivery("send", S, (ev.runs[5].started or 0) + 0.25, "heartbeat", ref=stale.fire_id)
    ev.deliveries = [d for d in ev.deliveries if d.ref != stale.fire_id] + [late]
    failed = failing(ev)
    assert set(failed) == {"no_overlapping_turns", "no_stale_deliveries", "no_unfinished_runs"}
    assert any("fence 5" in f and "fence 6" in f for f in failed["no_stale_deliveries"].failures)


def test_a_queued_message_never_answered_is_lost() -> None:
    ev = clean()
    ev.messages.append(UserMessage(9, S, "queued", T + 20))
    assert failing(ev)["messages_answered_once"].figures["lost"] == 1


def test_a_message_answered_twice_is_flagged_unless_a_kill_cut_its_commit() -> None:
    ev = clean()
    ev.deliveries.append(Delivery("send", S, T + 30, "reply", reply_to="7"))
    assert failing(ev)["messages_answered_once"].figures["answered_twice"] == 1
    ev.faults.append(Disruption("worker_kill", "w1", T + 3.35, T + 6))
    assert "messages_answered_once" not in failing(ev)


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
    young = Run(f"{S}:500", S, 100, "started", T + 59, T + 59.1, None, "w1")
    ev.runs.append(young)
    ev.deliveries.append(Delivery("send", S, T + 59.3, "heartbeat", ref=young.fire_id))
    finished_unseen = Run(f"{S}:501", S, 101, "completed", T + 59.5, T + 59.5, T + 59.8, "w1")
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
