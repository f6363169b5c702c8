"""An owner's default token budget: the budget of the owner's heartbeats that name none of their
own (a heartbeat's own first, the owner's default next, HBGW_HEARTBEAT_DAILY_TOKENS last) —
grammar, store (SQLite and PostgreSQL), the CLI, the API, and once through real beat and workers.
"""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

import pytest
from sqlalchemy import update
from support.api_fixtures import ALICE, BOB, Api
from support.cli_fixtures import Hbgw
from support.fake_openai import Text, openai_gateway
from support.harness import Gateway, wait_until
from support.seed import T0

from hbgw.core.clock import utcnow
from hbgw.core.errors import CommandError
from hbgw.sessions import replies
from hbgw.sessions.grammar import GrammarLimits, IntervalSchedule, SetHeartbeat, parse_command
from hbgw.sessions.grammar.costs import BudgetSource, parse_default_budget
from hbgw.sessions.grammar.policy import Policy
from hbgw.sessions.models import HeartbeatRow
from hbgw.sessions.states import HeartbeatStatus
from hbgw.sessions.store import Store

OPERATOR = GrammarLimits(daily_tokens=25_000)


def policy_of(text: str, limits: GrammarLimits = OPERATOR) -> Policy:
    command = parse_command(text, limits)
    assert isinstance(command, SetHeartbeat)
    return command.policy


def set_hb(store: Store, sid: str, text: str, limits: GrammarLimits = OPERATOR) -> Policy:
    store.heartbeats.set_heartbeat(
        sid,
        schedule=IntervalSchedule(600),
        schedule_text="every 10m",
        prompt="p",
        now=T0,
        policy=policy_of(f"/heartbeat every 10m {text} p", limits),
    )
    state = store.heartbeats.get_heartbeat(sid)
    assert state is not None
    return state.policy


def budget_of(store: Store, sid: str) -> tuple[int | None, str | None]:
    shown = store.heartbeats.heartbeat_status(sid, T0).to_json()
    return shown["daily_tokens"], shown["budget_source"]


# -- the grammar ---------------------------------------------------------------------------


def test_the_grammar_says_whose_budget_it_is() -> None:
    own = policy_of("/heartbeat every 1h budget 5k x")
    assert (own.budget, own.budget_from, own.describe()) == (
        5000,
        BudgetSource.HEARTBEAT,
        "budget 5k",
    )
    operator = policy_of("/heartbeat every 1h x")
    assert (operator.budget, operator.budget_from) == (25_000, BudgetSource.OPERATOR)
    assert operator.describe() == "budget 25k by operator default"
    assert policy_of("/heartbeat every 1h x", GrammarLimits()).budget_from is None
    assert Policy(budget=10).names_budget  # a policy built in code: its own


@pytest.mark.parametrize(("text", "tokens"), [("50k", 50_000), ("1.5m", 1_500_000), ("off", None)])
def test_a_default_budget_is_tokens_or_off(text: str, tokens: int | None) -> None:
    assert parse_default_budget(text) == tokens


@pytest.mark.parametrize("text", ["lots", "0", "-5k", ""])
def test_a_default_budget_that_is_none_is_refused_with_a_sentence(text: str) -> None:
    with pytest.raises(CommandError, match="token budget"):
        parse_default_budget(text)


# -- the store (SQLite and PostgreSQL) -------------------------------------------------------


def test_the_owners_default_comes_between_the_heartbeats_own_and_the_operators(
    store: Store,
) -> None:
    mine = [
        store.sessions.create_session(platform="slack", chat=f"C{i}", owner=ALICE, now=T0).id
        for i in range(3)
    ]
    theirs = store.sessions.create_session(platform="slack", chat="B", owner=BOB, now=T0).id
    set_hb(store, mine[0], "budget 5k")  # its own
    set_hb(store, mine[1], "")  # the operator's
    set_hb(store, mine[2], "", GrammarLimits())  # none at all
    set_hb(store, theirs, "")
    assert budget_of(store, mine[1]) == (25_000, "operator")
    assert store.heartbeats.owner_budget(ALICE).daily_tokens is None

    changed = store.heartbeats.set_owner_budget(ALICE, 40_000, 25_000, T0)
    assert (changed.daily_tokens, changed.following) == (40_000, 2)
    assert [budget_of(store, sid) for sid in mine] == [
        (5000, "heartbeat"),
        (40_000, "owner"),
        (40_000, "owner"),
    ]
    assert budget_of(store, theirs) == (25_000, "operator")  # another owner's: untouched
    # A heartbeat set afterwards without a budget takes the owner's default at once.
    assert set_hb(store, mine[0], "").budget == 40_000
    assert budget_of(store, mine[0]) == (40_000, "owner")
    status = replies.status_reply(store.heartbeats.heartbeat_status(mine[0], T0))
    assert (
        "budget 40k by owner default" in status and "0 of 40,000 tokens today (UTC, owner" in status
    )

    cleared = store.heartbeats.set_owner_budget(ALICE, None, 25_000, T0)
    assert (cleared.daily_tokens, cleared.following) == (None, 3)
    assert budget_of(store, mine[2]) == (25_000, "operator")
    store.heartbeats.set_owner_budget(ALICE, None, None, T0)  # no operator default either: no cap
    assert budget_of(store, mine[1]) == (None, None)


def test_a_budget_stored_before_0015_counts_as_the_heartbeats_own(store: Store) -> None:
    sid = store.sessions.create_session(platform="slack", chat="C1", owner=ALICE, now=T0).id
    set_hb(store, sid, "budget 7k")
    with store.heartbeats._transaction() as db:  # as 0015 leaves a row: a budget, no source
        db.execute(update(HeartbeatRow).values(budget_source=None))
    assert budget_of(store, sid) == (7000, "heartbeat")
    assert store.heartbeats.set_owner_budget(ALICE, 1000, None, T0).following == 0
    assert budget_of(store, sid) == (7000, "heartbeat")


def test_a_paused_heartbeat_follows_the_default_and_a_cleared_one_does_not(store: Store) -> None:
    paused, cleared = (
        store.sessions.create_session(platform="slack", chat=c, owner=ALICE, now=T0).id
        for c in "PC"
    )
    for sid in (paused, cleared):
        set_hb(store, sid, "", GrammarLimits())
    store.heartbeats.pause_heartbeat(paused, T0)
    store.heartbeats.clear_heartbeat(cleared, T0)
    assert store.heartbeats.set_owner_budget(ALICE, 9000, None, T0).following == 1
    assert store.heartbeats.get_heartbeat(paused).policy.budget == 9000  # type: ignore[union-attr]
    assert store.heartbeats.get_heartbeat(cleared).policy.budget is None  # type: ignore[union-attr]


# -- the surfaces ----------------------------------------------------------------------------


def test_the_cli_shows_and_sets_an_owners_default(
    hbgw: Hbgw, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HBGW_HEARTBEAT_DAILY_TOKENS", "25000")
    sid = hbgw("session", "create", "--platform", "slack", "--chat", "C1", "--owner", ALICE).out
    sid = sid.strip()
    hbgw("send", sid, "/heartbeat every 15m check CI")
    shown = hbgw("heartbeat", "budget", "--owner", ALICE)
    assert shown.out.strip() == (
        "alice has no default budget: the operator's 25k (1 heartbeat without a budget of "
        "their own)."
    )
    set_ = hbgw("heartbeat", "budget", "40k", "--owner", ALICE)
    assert set_.code == 0, set_.err
    assert set_.out.strip() == (
        "Default budget of alice: 40k tokens per UTC day (1 heartbeat without a budget of "
        "their own)."
    )
    status = json.loads(hbgw("heartbeat", "status", sid, "--json").out)
    assert (status["daily_tokens"], status["budget_source"]) == (40_000, "owner")
    assert "by owner default" in hbgw("heartbeat", "status", sid).out
    as_json = json.loads(hbgw("heartbeat", "budget", "off", "--owner", ALICE, "--json").out)
    assert as_json == {
        "owner": ALICE,
        "daily_tokens": None,
        "heartbeats_following": 1,
        "operator_daily_tokens": 25_000,
    }
    bad = hbgw("heartbeat", "budget", "lots", "--owner", ALICE)
    assert bad.code == 2 and "'lots' is not a default token budget" in bad.err


def test_the_api_sets_an_owners_default_for_that_owner_only(api: Api) -> None:
    with api.owner(ALICE) as alice, api.owner(BOB) as bob, api.admin() as admin:
        sid = api.new_session(alice)
        put = alice.put(
            f"/v1/sessions/{sid}/heartbeat", json={"schedule": "every 15m", "prompt": "p"}
        )
        assert put.status_code == 200, put.text
        assert put.json()["heartbeat"]["budget_source"] is None
        answer = alice.put(f"/v1/owners/{ALICE}/budget", json={"daily_tokens": "50k"})
        assert answer.status_code == 200, answer.text
        assert (answer.json()["daily_tokens"], answer.json()["heartbeats_following"]) == (50_000, 1)
        shown = alice.get(f"/v1/sessions/{sid}/heartbeat").json()
        assert (shown["daily_tokens"], shown["budget_source"]) == (50_000, "owner")
        assert alice.get(f"/v1/owners/{ALICE}/budget").json()["daily_tokens"] == 50_000
        # Another owner's default answers like a missing one; the admin reaches every owner.
        refused = bob.put(f"/v1/owners/{ALICE}/budget", json={"daily_tokens": 1})
        assert refused.status_code == 404 and refused.json()["error"]["code"] == "not_found"
        assert bob.get(f"/v1/owners/{ALICE}/budget").status_code == 404
        assert admin.put(f"/v1/owners/{BOB}/budget", json={"daily_tokens": 7000}).status_code == 200
        assert bob.get(f"/v1/owners/{BOB}/budget").json()["daily_tokens"] == 7000
        for body, sentence in (
            ({"daily_tokens": "lots"}, "is not a default token budget"),
            ({"daily_tokens": 0}, "whole number of tokens from 1"),
            ({"daily_tokens": "off"}, "DELETE it"),
            ({}, "The field 'daily_tokens' is required."),
        ):
            bad = alice.put(f"/v1/owners/{ALICE}/budget", json=body)
            assert bad.status_code == 422 and sentence in bad.json()["error"]["message"], bad.text
        gone = alice.delete(f"/v1/owners/{ALICE}/budget")
        assert gone.status_code == 200 and gone.json()["daily_tokens"] is None
        shown = alice.get(f"/v1/sessions/{sid}/heartbeat").json()
        assert (shown["daily_tokens"], shown["budget_source"]) == (None, None)


# -- end to end: real beat and worker, the fake model endpoint ----------------------------------


def test_an_owners_default_pauses_a_heartbeat_that_names_no_budget(
    tmp_path: Path, redis_url: str, redis_ns: str
) -> None:
    with openai_gateway(tmp_path, redis_url, redis_ns) as (gw, endpoint):
        endpoint.then(Text("CI is green."), Text("CI is still green."), Text("never sent"))
        with gw.worker("w1"):
            sid = gw.store.sessions.create_session(
                platform="slack", chat="C1", thread="T1", owner=ALICE, now=utcnow()
            ).id
            gw.store.heartbeats.set_owner_budget(ALICE, 30, None, utcnow())
            gw.store.heartbeats.set_heartbeat(
                sid,
                schedule=IntervalSchedule(1),
                schedule_text="every 1s",
                prompt="check CI",
                now=utcnow() - timedelta(seconds=2),
                policy=policy_of("/heartbeat every 1m exact check CI", GrammarLimits()),
            )
            gw.rt.due.settle(sid)
            first, second = sent(gw, sid, 2)
            gw.final_runs(sid, 2)
            for _ in range(3):
                gw.tick()
        status = gw.store.heartbeats.heartbeat_status(sid, utcnow())
    assert first == "CI is green."
    # 18 tokens a turn (11 + 7): the second crosses the owner's 30 mid-turn.
    assert second.startswith("CI is still green.\n\n♥ Heartbeat paused — token budget spent: 36")
    assert status.status == HeartbeatStatus.PAUSED and status.tokens_today == 36
    assert status.state is not None and status.state.policy.budget_from is BudgetSource.OWNER
    assert len(endpoint.requests()) == 2 and len(gw.runs(sid)) == 2


def sent(gw: Gateway, sid: str, count: int) -> list[str]:
    def texts() -> list[str] | None:
        gw.tick()
        found = [r["text"] for r in gw.deliveries(sid, "send")]
        return found if len(found) >= count else None

    return wait_until(texts, 30, f"{count} heartbeat replies")  # type: ignore[no-any-return]
