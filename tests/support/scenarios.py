"""Scenario steps several test modules drive a gateway through."""

from __future__ import annotations

from hbgw.core.clock import utcnow
from hbgw.gateway.inbound import InboundParts, receive
from hbgw.invariants import InvariantReport, check
from hbgw.sessions.grammar import GrammarLimits
from hbgw.sessions.states import RunState
from hbgw.sessions.views import RunView
from support.harness import Gateway, wait_until

LIMITS = GrammarLimits(min_interval=1, default_interval=60, max_prompt_chars=4000)


def send(gw: Gateway, sid: str, text: str) -> object:
    parts = InboundParts.of(gw.rt)
    return receive(gw.store, sid, text, utcnow(), LIMITS, parts=parts, dispatcher=gw.dispatcher)


def busy_with_slow_turn(gw: Gateway, sid: str) -> None:
    send(gw, sid, "SLOW user work")
    wait_until(lambda: gw.rt.gate.lock_holder(sid), what="the slow user turn to hold the lock")


def fire_pending(gw: Gateway, sid: str) -> str:
    gw.tick()
    return wait_until(lambda: gw.rt.gate.pending(sid), what="the fire to wait as pending")  # type: ignore[no-any-return]


def busy_session_with_pending_fire(gw: Gateway) -> str:
    """A session in a slow user turn whose heartbeat came due and waits as pending."""
    sid = gw.session()
    busy_with_slow_turn(gw, sid)
    gw.due_now(sid)
    fire_pending(gw, sid)
    return sid


def assert_invariants(gw: Gateway) -> None:
    report = check_gateway(gw)
    assert report.ok, report.to_json()


def started_run(gw: Gateway, sid: str, what: str) -> RunView:
    """The session's run once its turn is in the agent (started, its prompt injected)."""
    runs: list[RunView] = wait_until(
        lambda: (
            [r for r in gw.runs(sid) if r.state == RunState.STARTED]
            if gw.store.messages.list_messages(sid)
            else None
        ),
        what=what,
    )
    [run] = runs
    return run


def check_gateway(gw: Gateway, *, include_index: bool = True) -> InvariantReport:
    """``invariants.check`` on the deployment's ledger, gate and due index, now."""
    rt = gw.rt
    return check(
        rt.store.ledger,
        rt.gate,
        rt.index,
        utcnow(),
        restore_interval=rt.settings.restore_interval,
        include_index=include_index,
    )
