"""An end: ``times N``, ``for 7d`` and the completion marker clear the heartbeat visibly, through
real beat and workers (backdated state, not sleeps)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from support.harness import Gateway, wait_until

from hbgw.core.clock import utcnow
from hbgw.sessions.grammar import IntervalSchedule
from hbgw.sessions.grammar.policy import Policy
from hbgw.sessions.store.heartbeat_records import NO_HEARTBEAT
from hbgw.workers.heartbeat_end import DONE_NOTICE, split_done


def set_at(
    gw: Gateway, sid: str, prompt: str, *, seconds: int, ago: float, **policy: object
) -> None:
    gw.store.heartbeats.set_heartbeat(
        sid,
        schedule=IntervalSchedule(seconds),
        schedule_text=f"every {seconds}s",
        prompt=prompt,
        now=utcnow() - timedelta(seconds=ago),
        policy=Policy(exact=True, **policy),  # type: ignore[arg-type]
    )
    gw.rt.due.settle(sid)


def beat_sent(gw: Gateway, sid: str, count: int = 1) -> list[str]:
    def sent() -> list[str] | None:
        gw.tick()
        texts = [r["text"] for r in gw.deliveries(sid, "send")]
        return texts if len(texts) >= count else None

    return wait_until(sent, 30, f"{count} heartbeat replies")  # type: ignore[no-any-return]


def status(gw: Gateway, sid: str) -> str:
    return str(gw.store.heartbeats.heartbeat_status(sid, utcnow()).status)


@pytest.mark.parametrize(
    ("reply", "sent"),
    [
        ("[DONE]", DONE_NOTICE),
        ("CI is green, PR merged.\\n[DONE]", f"CI is green, PR merged.\n\n{DONE_NOTICE}"),
        ("[SILENT]\\n[done]", DONE_NOTICE),
    ],
)
def test_the_completion_marker_alone_or_at_the_end_clears_the_heartbeat(
    gateway: Gateway, reply: str, sent: str
) -> None:
    gw = gateway
    with gw.worker("w1"):
        sid = gw.session()
        set_at(gw, sid, f"SAY: {reply}", seconds=60, ago=61)
        assert beat_sent(gw, sid) == [sent]
        gw.final_runs(sid)
    assert status(gw, sid) == NO_HEARTBEAT
    assert gw.rt.index.due_ms(sid) is None


def test_the_marker_inside_a_sentence_is_not_a_completion(gateway: Gateway) -> None:
    gw = gateway
    with gw.worker("w1"):
        sid = gw.session()
        set_at(gw, sid, "SAY: Step 1 is [DONE], step 2 is next.", seconds=60, ago=61)
        assert beat_sent(gw, sid) == ["Step 1 is [DONE], step 2 is next."]
        gw.final_runs(sid)
    assert status(gw, sid) == "active"


def test_times_n_ends_with_the_nth_fire(gateway: Gateway) -> None:
    gw = gateway
    with gw.worker("w1"):
        sid = gw.session()
        set_at(gw, sid, "check CI", seconds=1, ago=2, times=2)
        first, second = beat_sent(gw, sid, 2)
        gw.final_runs(sid, 2)
        for _ in range(3):
            gw.tick()
    assert "Heartbeat ended" not in first
    assert second.endswith("♥ Heartbeat ended: it fired 2 times, as set (times 2).")
    assert status(gw, sid) == NO_HEARTBEAT and len(gw.runs(sid)) == 2


def test_for_ends_with_the_last_fire_before_the_end(gateway: Gateway) -> None:
    gw = gateway
    with gw.worker("w1"):
        sid = gw.session()
        # Set 61 s ago for 90 s: this fire's next due time (60 s on) comes after the end.
        set_at(gw, sid, "QUIET", seconds=60, ago=61, lasts=90)
        [sent] = beat_sent(gw, sid)
        gw.final_runs(sid)
    assert sent.startswith("♥ Heartbeat ended: its end (") and "before the next due" in sent
    assert status(gw, sid) == NO_HEARTBEAT


def test_a_for_shorter_than_the_first_due_time_is_refused(gateway: Gateway) -> None:
    from hbgw.core.errors import CommandError

    sid = gateway.session()
    with pytest.raises(CommandError, match="would never fire"):
        set_at(gateway, sid, "x", seconds=3600, ago=0, lasts=60)


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        ("[DONE]", ("", True)),
        ("  [done]  \n", ("", True)),
        ("All merged.\n\n[DONE]\n", ("All merged.", True)),
        ("I am [DONE] with step 1", ("I am [DONE] with step 1", False)),
        ("[DONE]\nbut one more thing", ("[DONE]\nbut one more thing", False)),
        ("Done.", ("Done.", False)),
    ],
)
def test_split_done(reply: str, expected: tuple[str, bool]) -> None:
    assert split_done(reply) == expected


def test_the_grammar_reads_an_end() -> None:
    from hbgw.core.errors import CommandError
    from hbgw.sessions.grammar import SetHeartbeat, parse_command

    command = parse_command("/heartbeat every 1h for 7 days times 3 check")
    assert isinstance(command, SetHeartbeat) and command.prompt == "check"
    assert (command.policy.lasts, command.policy.times) == (7 * 86400, 3)
    glued = parse_command("/heartbeat every 1h for 36h check")
    assert isinstance(glued, SetHeartbeat) and glued.policy.lasts == 36 * 3600
    with pytest.raises(CommandError, match="from 1 to"):
        parse_command("/heartbeat every 1h times 0 check")
    with pytest.raises(CommandError, match="given twice"):
        parse_command("/heartbeat every 1h times 2 times 3 check")
