"""Dedupe and backing off at their edges: the window (just inside, just outside), whitespace,
``dedupe 0``, another route; doubling up to the ceiling and the snap back; the grammar; and the
store's part (the fire path's finish and a user turn) on SQLite and PostgreSQL."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta

import pytest
from support.seed import T0

from hbgw.core.clock import to_ms
from hbgw.core.errors import CommandError
from hbgw.sessions import heartbeat as hb
from hbgw.sessions.dedupe import is_duplicate, normalise, reply_hash
from hbgw.sessions.grammar import CronSchedule, GrammarLimits, IntervalSchedule, SetHeartbeat
from hbgw.sessions.grammar import parse_command as parse
from hbgw.sessions.grammar.policy import Policy, parse_policy
from hbgw.sessions.replies import status_reply
from hbgw.sessions.states import DeliveryState, RunState, fire_id
from hbgw.sessions.store import Store
from hbgw.sessions.store.heartbeat_records import HeartbeatStatusView
from hbgw.sessions.views import DeliveryOutcome, FireStart, Outbound, ReplyStart, Started

ROUTE = ("slack", "C1", "T1")
HASH = reply_hash(*ROUTE, "all green")


def state(*, seconds: int = 900, **policy: object) -> hb.HeartbeatState:
    return hb.set_heartbeat(
        None,
        schedule=IntervalSchedule(seconds),
        schedule_text=f"every {seconds}s",
        prompt="check CI",
        origin_chat="C1",
        origin_thread="T1",
        now=T0,
        policy=Policy(exact=True, **policy),  # type: ignore[arg-type]
    )


def test_whitespace_is_normalised_and_the_route_is_part_of_the_digest() -> None:
    assert normalise("  all\n\tgreen \n") == "all green"
    assert reply_hash(*ROUTE, "all   green\n") == HASH == reply_hash(*ROUTE, "\tall\ngreen")
    assert reply_hash(*ROUTE, "All green") != HASH  # only whitespace is normalised
    assert reply_hash("slack", "C1", "T2", "all green") != HASH  # another thread
    assert reply_hash("slack", "C2", "T1", "all green") != HASH  # another chat
    assert reply_hash("telegram", "C1", "T1", "all green") != HASH
    assert reply_hash("slack", "C1", None, "all green") != HASH


@pytest.mark.parametrize(
    ("after", "duplicate"),
    [(0, True), (3599, True), (3600, False), (3601, False)],
)
def test_the_window_holds_from_the_delivery_to_just_before_its_end(
    after: int, duplicate: bool
) -> None:
    seen = replace(state(dedupe=3600), last_reply_hash=HASH, last_reply_at=T0)
    assert is_duplicate(seen, HASH, T0 + timedelta(seconds=after)) is duplicate


def test_window_zero_is_off_and_other_replies_are_never_duplicates() -> None:
    remembered = {"last_reply_hash": HASH, "last_reply_at": T0}
    assert not is_duplicate(replace(state(dedupe=0), **remembered), HASH, T0)  # type: ignore[arg-type]
    seen = replace(state(dedupe=3600), **remembered)  # type: ignore[arg-type]
    assert not is_duplicate(seen, reply_hash(*ROUTE, "all red"), T0)
    assert not is_duplicate(seen, reply_hash("slack", "C1", "T2", "all green"), T0)
    assert not is_duplicate(state(dedupe=3600), HASH, T0)  # nothing delivered yet


def test_the_interval_doubles_up_to_the_ceiling_and_snaps_back() -> None:
    s = state(seconds=900, backoff=3600)
    fired = [s.interval_seconds()]
    for _ in range(4):
        s = hb.after_reply(hb.reserve(s, T0), quiet=True, delivered_hash=None, now=T0)
        fired.append(s.interval_seconds())
        assert s.next_due() == T0 + timedelta(seconds=fired[-1] or 0)  # the one due time
    assert fired == [900, 1800, 3600, 3600, 3600]
    assert s.backing_off() and s.missed(T0 + timedelta(hours=3)) == 2  # counted in 1h steps
    view = HeartbeatStatusView("s1", s, T0)
    assert ", backing off: every 1h (base 15m)." in status_reply(view)
    assert view.to_json()["interval_now_seconds"] == 3600 and view.to_json()["backing_off"]
    changed = hb.after_reply(s, quiet=False, delivered_hash=HASH, now=T0)
    assert (changed.interval_seconds(), changed.backing_off()) == (900, False)
    assert (changed.last_reply_hash, changed.last_reply_at) == (HASH, T0)
    assert "backing off" not in status_reply(HeartbeatStatusView("s1", changed, T0))


def test_a_ceiling_between_doublings_is_the_ceiling_and_backoff_is_opt_in() -> None:
    s = state(seconds=900, backoff=2700)
    for expected in (1800, 2700, 2700):
        s = hb.after_reply(s, quiet=True, delivered_hash=None, now=T0)
        assert s.interval_seconds() == expected
    plain = hb.after_reply(state(seconds=900), quiet=True, delivered_hash=None, now=T0)
    assert plain.quiet_fires == 0 and plain.interval_seconds() == 900


def test_the_user_speaking_snaps_back_from_now() -> None:
    s = hb.after_reply(state(backoff=3600), quiet=True, delivered_hash=None, now=T0)
    later = T0 + timedelta(minutes=20)
    back = hb.user_spoke(s, later)
    assert back is not None and back.quiet_fires == 0
    assert back.next_due() == later + timedelta(minutes=15)
    assert hb.user_spoke(back, later) is None  # nothing to snap back: no write
    assert hb.resume(hb.pause(s, T0), later).quiet_fires == 0


def test_backoff_is_refused_where_it_cannot_double() -> None:
    with pytest.raises(CommandError, match="give more than the interval"):
        state(seconds=3600, backoff=3600)
    with pytest.raises(CommandError, match="doubles an interval"):
        hb.set_heartbeat(
            None,
            schedule=CronSchedule("0 9 * * *", "UTC"),
            schedule_text="cron 0 9 * * *",
            prompt="x",
            origin_chat="C1",
            origin_thread=None,
            now=T0,
            policy=Policy(backoff=7200),
        )


LIMITS = GrammarLimits(min_interval=1, dedupe=86400)


@pytest.mark.parametrize(
    ("text", "dedupe", "backoff", "prompt"),
    [
        ("/heartbeat every 15m check CI", 86400, None, "check CI"),  # the operator's default
        ("/heartbeat every 15m dedupe 6h check CI", 21600, None, "check CI"),
        ("/heartbeat every 15m dedupe 6 hours backoff 4h check", 21600, 14400, "check"),
        ("/heartbeat every 15m dedupe 0 backoff 2h check", 0, 7200, "check"),
        ("/heartbeat every 15m dedupe 0m check", 0, None, "check"),
        ("/heartbeat every 1h dedupe the list", 86400, None, "dedupe the list"),
        ("/heartbeat every 1h backoff when idle", 86400, None, "backoff when idle"),
    ],
)
def test_the_grammar_reads_dedupe_and_backoff(
    text: str, dedupe: int, backoff: int | None, prompt: str
) -> None:
    command = parse(text, LIMITS)
    assert isinstance(command, SetHeartbeat) and command.prompt == prompt
    assert (command.policy.dedupe, command.policy.backoff) == (dedupe, backoff)


def test_the_words_show_except_the_usual_window_and_bad_values_say_so() -> None:
    assert Policy(dedupe=21600, backoff=14400).describe() == "dedupe 6h backoff 4h"
    assert Policy(dedupe=86400).describe() == Policy(dedupe=0).describe() == ""
    with pytest.raises(CommandError, match="given twice"):
        parse("/heartbeat every 15m dedupe 1h dedupe 2h x", LIMITS)
    assert parse_policy(
        "dedupe 0 backoff 4h", tz=None, limits=GrammarLimits(min_interval=1, dedupe=600)
    ) == Policy(dedupe=0, backoff=14400)
    with pytest.raises(CommandError, match="--dedupe and --backoff take a duration"):
        parse_policy("dedupe soon", tz=None, limits=GrammarLimits(min_interval=1))


# -- the store, on SQLite and PostgreSQL -------------------------------------------------------


def set_hb(store: Store, sid: str, now: datetime = T0) -> None:
    store.heartbeats.set_heartbeat(
        sid,
        schedule=IntervalSchedule(600),
        schedule_text="every 10m dedupe 1h backoff 40m",
        prompt="check CI",
        now=now,
        policy=Policy(exact=True, dedupe=3600, backoff=2400),
    )


def fire(store: Store, sid: str, fence: int, due: datetime, *, quiet: bool) -> datetime | None:
    """One fire through the store's steps; ``quiet``: nothing sent (silence or a repeat)."""
    fid = fire_id(sid, to_ms(due))
    begun = store.ledger.begin_fire(
        sid, fence, fid, to_ms(due), due, FireStart(1, lambda _: "p", 5)
    )
    assert isinstance(begun.outcome, Started), begun.outcome
    run = begun.outcome.run
    state = DeliveryState.SUPPRESSED if quiet else DeliveryState.SENT
    if not quiet:
        store.ledger.mark_delivering(run.key, fence, due, channel="slack", kind="heartbeat")
    finished = store.ledger.finish_fire(
        run.key,
        RunState.SILENT if quiet else RunState.COMPLETED,
        fence,
        due,
        reply="all green",
        reply_kind="assistant",
        delivered=DeliveryOutcome(fid, state),
        channel="slack",
        quiet=quiet,
        delivered_hash=None if quiet else HASH,
    )
    return finished.next_due


def user_turn_mark(store: Store, sid: str, fence: int, now: datetime) -> ReplyStart:
    """A user message and its turn's fenced mark (``begin_reply``): the user spoke."""
    store.ledger.claim_fence(sid, fence, now)
    message = store.messages.accept_message(sid, "hi", now=now, idempotency_key=f"k{fence}").message
    outbound = [Outbound(f"msg:{message.id}", "reply")]
    start = store.ledger.begin_reply(
        sid, message.key, fence, now, channel="slack", outbound=outbound
    )
    assert start is not None
    return start


def test_the_store_keeps_the_digest_and_the_quiet_fires(store: Store) -> None:
    sid = store.sessions.create_session(platform="slack", chat="C1", thread="T1", now=T0).id
    set_hb(store, sid)
    first = T0 + timedelta(minutes=10)
    assert fire(store, sid, 1, first, quiet=False) == first + timedelta(minutes=10)
    read = store.heartbeats.get_heartbeat(sid)
    assert read is not None and (read.last_reply_hash, read.last_reply_at) == (HASH, first)
    assert (read.policy.dedupe, read.policy.backoff) == (3600, 2400)
    second = first + timedelta(minutes=10)
    assert fire(store, sid, 2, second, quiet=True) == second + timedelta(minutes=20)
    third = second + timedelta(minutes=20)
    assert fire(store, sid, 3, third, quiet=True) == third + timedelta(minutes=40)  # ceiling
    status = store.heartbeats.heartbeat_status(sid, third).to_json()
    assert (status["backing_off"], status["interval_now_seconds"]) == (True, 2400)
    assert status["next_due_at"] is not None
    kept = store.heartbeats.get_heartbeat(sid)
    assert kept is not None and kept.last_reply_at == first  # a held-back repeat is no delivery
    spoke = third + timedelta(minutes=5)
    snapped = user_turn_mark(store, sid, 4, spoke)
    assert snapped.snapped and snapped.next_due == spoke + timedelta(minutes=10)
    assert not user_turn_mark(store, sid, 5, spoke).snapped  # nothing backs off any more
    set_hb(store, sid, spoke)  # set again: the route's memory stays, the backoff starts over
    again = store.heartbeats.get_heartbeat(sid)
    assert again is not None and (again.last_reply_hash, again.quiet_fires) == (HASH, 0)
