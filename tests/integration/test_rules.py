"""The firing rules of docs/contract.md, end to end on real Redis, Celery and SQL.

Workers are real Celery workers (in-process threads pool); beat ticks are driven here.
Heartbeats are backdated instead of waiting for intervals to pass.
"""

from __future__ import annotations

import json
from datetime import timedelta

from support.harness import Gateway, wait_until
from support.scenarios import (
    assert_invariants,
    busy_session_with_pending_fire,
    send,
    started_run,
)

from hbgw.core.clock import to_ms, utcnow
from hbgw.sessions.grammar import IntervalSchedule
from hbgw.sessions.states import MessageState, RunState


def test_idle_only_then_fires_at_the_idle_transition(gateway: Gateway) -> None:
    gw = gateway
    with gw.worker("w1"):
        sid = busy_session_with_pending_fire(gw)
        # Rule 2: never interrupts the running turn. The slow turn may end at any moment now,
        # and the pending fire then runs at once: a run read here is a fault only if the user's
        # reply, read after it, is not there yet.
        early = gw.runs(sid)
        replied = any(m.reply_to is not None for m in gw.store.messages.list_messages(sid))
        assert early == [] or replied, early
        [run] = gw.final_runs(sid)
    assert run.deferred and run.state == RunState.COMPLETED
    user_reply = next(m for m in gw.store.messages.list_messages(sid) if m.reply_to is not None)
    assert run.started_at is not None
    assert run.started_at >= user_reply.created_at
    # It ran at the idle transition, not one interval (60 s) later.
    assert run.started_at - user_reply.created_at < timedelta(seconds=30)
    assert_invariants(gw)


def test_queued_user_messages_run_first(gateway: Gateway) -> None:
    gw = gateway
    with gw.worker("w1"):
        sid = busy_session_with_pending_fire(gw)
        send(gw, sid, "second")
        send(gw, sid, "third")
        gw.final_runs(sid)
    kinds = [(m.kind, m.text.splitlines()[0]) for m in gw.store.messages.list_messages(sid)]
    user_turns = [k for k in kinds if k[0] in ("user", "heartbeat")]
    assert [k[0] for k in user_turns] == ["user", "user", "user", "heartbeat"], kinds


def test_missed_intervals_coalesce_into_one_fire(gateway: Gateway) -> None:
    gw = gateway
    with gw.worker("w1"):
        sid = gw.session()
        gw.due_now(sid, seconds=60, missed=5)
        gw.tick()
        [run] = gw.final_runs(sid)
        for _ in range(3):
            gw.tick()
    assert run.missed == 5
    status = gw.store.heartbeats.heartbeat_status(sid, utcnow())
    assert status.to_json()["fire_count"] == 1
    assert status.next_due == run.reserved_at + timedelta(seconds=60)  # re-anchored at the fire
    assert gw.rt.index.due_ms(sid) == to_ms(run.reserved_at + timedelta(seconds=60))
    assert len(gw.runs(sid)) == 1


def test_injected_prompt_and_unchanged_system_prompt(gateway: Gateway) -> None:
    gw = gateway
    echo = gw.settings.model_copy(update={"agent": "echo"})
    with gw.worker("w1", settings=echo):
        sid = gw.session()
        send(gw, sid, "hello")
        wait_until(lambda: gw.deliveries(sid, "send"), what="the user reply")
        gw.due_now(sid, seconds=900, prompt="check whether CI for PR #1234 finished")
        gw.tick()
        gw.final_runs(sid)
    log_path = gw.settings.agent_log
    assert log_path is not None
    requests = [json.loads(line) for line in log_path.read_text().splitlines()]
    user, beat = requests[0], requests[1]
    assert beat["kind"] == "heartbeat"
    assert beat["text"].startswith(
        "[Heartbeat — recurring instruction, fires every 15m]\n"
        "check whether CI for PR #1234 finished\n\n"
    )
    assert "do not invent work" in beat["text"]
    assert beat["system_prompt"] == user["system_prompt"]
    assert beat["tools"] == user["tools"]
    stored = [m for m in gw.store.messages.list_messages(sid) if m.kind == "heartbeat"]
    assert stored and stored[0].role == "user"  # an ordinary user turn of the same session


def test_reply_goes_to_origin_without_quoting(gateway: Gateway) -> None:
    gw = gateway
    with gw.worker("w1"):
        sid = gw.session(chat="CNOW", thread="TNOW")
        gw.store.heartbeats.set_heartbeat(
            sid,
            schedule=IntervalSchedule(60),
            schedule_text="every 1m",
            prompt="status please",
            now=utcnow() - timedelta(seconds=61),
            origin_chat="C-origin",
            origin_thread="T-origin",
        )
        gw.rt.due.settle(sid)
        gw.tick()
        gw.final_runs(sid)
    [sent] = gw.deliveries(sid, "send")
    assert (sent["chat"], sent["thread"], sent["reply_to"]) == ("C-origin", "T-origin", None)
    assert sent["kind"] == "heartbeat"


def test_silence_marker_sends_nothing_on_heartbeat_turns(gateway: Gateway) -> None:
    gw = gateway
    with gw.worker("w1"):
        sid = gw.session()
        gw.due_now(sid, prompt="QUIET unless something changed")
        gw.tick()
        [run] = gw.final_runs(sid)
        send(gw, sid, "QUIET please")  # a human turn that returns only the marker
        wait_until(lambda: gw.deliveries(sid, "send"), what="the notice")
    assert run.state == RunState.SILENT
    [notice] = gw.deliveries(sid, "send")
    assert notice["kind"] == "notice" and "no reply" in notice["text"]


def test_failed_heartbeat_turn_is_never_silent(gateway: Gateway) -> None:
    gw = gateway
    with gw.worker("w1"):
        sid = gw.session()
        gw.due_now(sid, prompt="FAIL QUIET")
        gw.tick()
        [run] = gw.final_runs(sid)
    assert run.state == RunState.FAILED
    [sent] = gw.deliveries(sid, "send")
    assert sent["kind"] == "failure" and "exited with 3" in sent["text"]
    assert gw.store.heartbeats.heartbeat_status(sid, utcnow()).to_json()["fire_count"] == 1


def test_heartbeat_turns_show_no_typing_or_progress(gateway: Gateway) -> None:
    gw = gateway
    with gw.worker("w1"):
        beat_sid, user_sid = gw.session(chat="A"), gw.session(chat="B")
        gw.due_now(beat_sid)
        gw.tick()
        gw.final_runs(beat_sid)
        send(gw, user_sid, "hello")
        wait_until(lambda: gw.deliveries(user_sid, "send"), what="the user reply")
    assert [r["call"] for r in gw.deliveries(beat_sid)] == ["send"]
    user_calls = [r["call"] for r in gw.deliveries(user_sid)]
    assert "typing" in user_calls and "progress" in user_calls


def test_turn_that_loses_its_lock_stops_and_writes_nothing(gateway: Gateway) -> None:
    gw = gateway
    with gw.worker("w1"):
        sid = gw.session()
        gw.due_now(sid, prompt="SLOW check")
        gw.tick()
        run = started_run(gw, sid, "the turn to start and inject its prompt")
        # The lease ran out and another turn took over: new lock, newer fence.
        gw.rt.client.delete(gw.rt.keys.lock(sid))
        gw.store.ledger.claim_fence(sid, run.fence + 1, utcnow())
    # Leaving the block shuts the worker down, which waits for the slow turn to return.
    [after] = gw.runs(sid)
    # Counted (it reached the agent); the newer grant's claim said how it ended.
    assert (after.state, after.detail) == (RunState.FAILED, "lock lost before delivery")
    assert gw.deliveries(sid, "send") == []
    assert [m.kind for m in gw.store.messages.list_messages(sid)] == ["heartbeat"]


def test_message_taken_by_a_dead_turn_is_answered_not_lost(gateway: Gateway) -> None:
    gw = gateway
    sid = gw.session()
    message = gw.store.messages.add_message(
        sid,
        role="user",
        kind="user",
        text="are you there?",
        now=utcnow(),
        state=MessageState.QUEUED,
    )
    gw.rt.gate.enqueue_user(sid, str(message.id))
    # A worker took the lock and the message, then died: its lease runs out.
    gw.rt.gate.try_begin_user(sid, "dead-worker", 100)
    assert gw.rt.gate.pop_message(sid) == str(message.id)
    wait_until(lambda: gw.rt.gate.lock_holder(sid) is None, what="the dead turn's lease")
    with gw.worker("w1"):
        gw.tick()  # beat's sweeper finds the orphaned message
        reply = wait_until(lambda: gw.store.messages.reply_for(message.id), what="the reply")
    assert reply.text == "user reply to: are you there?"
    assert gw.rt.gate.backlog(sid) == 0


def test_not_due_never_fires_even_from_a_wrong_index_entry(gateway: Gateway) -> None:
    gw = gateway
    with gw.worker("w1"):
        sid = gw.session()
        gw.heartbeat(sid, seconds=600)
        true_due = gw.rt.index.due_ms(sid)
        gw.rt.index.schedule(sid, gw.rt.now_ms() - 1000)  # an index entry that is wrong
        gw.tick()
        wait_until(lambda: gw.rt.index.due_ms(sid) == true_due, what="the entry to be corrected")
    assert gw.runs(sid) == []  # rule 1: SQL decides what is due, not the index


def test_a_failed_delivery_fails_the_turn_and_frees_the_session(gateway: Gateway) -> None:
    gw = gateway
    unwritable = gw.settings.home / "not-a-file"
    unwritable.mkdir()
    # No retries: a failed send is the last (retries: tests/e2e/test_delivery_retries.py).
    broken = gw.settings.model_copy(update={"channel_file": unwritable, "delivery_retries": 0})
    with gw.worker("w1", settings=broken):
        sid = gw.session()
        gw.due_now(sid)
        gw.tick()
        [run] = gw.final_runs(sid)
        send(gw, sid, "still there?")
        wait_until(lambda: gw.rt.gate.is_idle(sid) and gw.rt.gate.backlog(sid) == 0)
    assert run.state == RunState.FAILED and (run.detail or "").startswith("delivery failed:")
    notices = [m for m in gw.store.messages.list_messages(sid) if m.reply_to is not None]
    assert [m.kind for m in notices] == ["notice"]


def test_emergency_stop_holds_user_turns_until_lifted(gateway: Gateway) -> None:
    gw = gateway
    with gw.worker("w1") as runner:
        sid = gw.session()
        gw.rt.gate.set_estop(True)
        queued = send(gw, sid, "hello?")
        assert runner.drain(sid) == "estop"
        assert gw.rt.gate.backlog(sid) == 1 and gw.deliveries(sid) == []
        gw.rt.gate.set_estop(False)
        gw.tick()  # the sweeper dispatches the waiting inbox
        reply = wait_until(lambda: gw.store.messages.reply_for(queued.message_id), what="the reply")  # type: ignore[attr-defined]
    assert reply.text == "user reply to: hello?"
