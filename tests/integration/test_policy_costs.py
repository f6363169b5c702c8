"""Cost caps: a token budget per heartbeat per UTC day, the operator's default, the pause after
the turn that reaches it, and a model among the allowed ones — grammar, store (SQLite and
PostgreSQL), every surface, and once through real beat and workers."""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from support.api_fixtures import ALICE, Api
from support.cli_fixtures import Hbgw
from support.fake_openai import Text, openai_gateway
from support.fires import begin, start
from support.harness import Gateway, wait_until
from support.seed import T0

from hbgw.core.clock import utcnow
from hbgw.core.errors import CommandError
from hbgw.core.usage import TokenUsage
from hbgw.sessions import replies
from hbgw.sessions.grammar import GrammarLimits, IntervalSchedule, SetHeartbeat, parse_command
from hbgw.sessions.grammar.policy import Policy
from hbgw.sessions.heartbeat import set_heartbeat
from hbgw.sessions.states import HeartbeatStatus, RunState
from hbgw.sessions.store import Store
from hbgw.sessions.views import Started
from hbgw.workers.heartbeat_end import budget_notice, budget_reason
from hbgw.workers.turn_io import Answer

ALLOWED = GrammarLimits(allowed_models=("gpt-4o-mini", "llama3"))


def set_command(text: str, limits: GrammarLimits = ALLOWED) -> SetHeartbeat:
    command = parse_command(text, limits)
    assert isinstance(command, SetHeartbeat)
    return command


# -- the grammar ---------------------------------------------------------------------------


def test_budget_and_model_are_policy_words() -> None:
    command = set_command("/heartbeat every 15m budget 50k model gpt-4o-mini check CI")
    assert (command.prompt, command.policy.budget, command.policy.model) == (
        "check CI",
        50_000,
        "gpt-4o-mini",
    )
    assert command.schedule_text == "every 15m budget 50k model gpt-4o-mini"
    assert set_command("/heartbeat every 1h budget 1.5m x").policy.budget == 1_500_000
    assert set_command("/heartbeat every 1h budget 20000 x").policy.describe() == "budget 20k"
    # Not a budget after 'budget': the prompt starts there.
    assert set_command("/heartbeat every 1h budget review").prompt == "budget review"


@pytest.mark.parametrize("value", ["0", "1.2345k", "2000000m"])
def test_a_budget_out_of_range_is_refused(value: str) -> None:
    with pytest.raises(CommandError, match="whole number of tokens from 1 to"):
        parse_command(f"/heartbeat every 1h budget {value} x", ALLOWED)


def test_a_model_not_allowed_is_refused_naming_the_allowed_ones() -> None:
    with pytest.raises(CommandError) as refused:
        parse_command("/heartbeat every 1h model gpt-5 check", ALLOWED)
    assert str(refused.value) == (
        "Model 'gpt-5' is not allowed — the allowed models are: gpt-4o-mini, llama3."
    )
    with pytest.raises(CommandError, match=r"allows no model choice.*HBGW_ALLOWED_MODELS"):
        parse_command("/heartbeat every 1h model llama3 check")


def test_the_owners_default_budget_applies_when_none_is_given() -> None:
    limits = GrammarLimits(daily_tokens=40_000)
    assert set_command("/heartbeat every 1h check", limits).policy.budget == 40_000
    assert set_command("/heartbeat every 1h budget 5k check", limits).policy.budget == 5_000
    assert set_command("/heartbeat every 1h check").policy.budget is None  # blank: no cap


# -- when the budget is spent ----------------------------------------------------------------


def answer(tokens: int) -> Answer:
    return Answer(text="ok", usage=TokenUsage(tokens - 1, 1, "m"))


def state_with(budget: int | None) -> object:
    return set_heartbeat(
        None,
        schedule=IntervalSchedule(600),
        schedule_text="every 10m",
        prompt="p",
        origin_chat="C1",
        origin_thread=None,
        now=T0,
        policy=Policy(budget=budget),
    )


@pytest.mark.parametrize(
    ("before", "turn", "paused"),
    [
        (900, 99, False),  # one token under: it goes on
        (900, 100, True),  # exactly reached: spent
        (900, 450, True),  # crossed mid-turn: this turn is delivered, then it pauses
        (1000, 5, True),  # already spent before the turn (resumed the same day)
    ],
)
def test_the_budget_is_spent_when_the_days_tokens_reach_it(
    before: int, turn: int, paused: bool
) -> None:
    reason = budget_reason(state_with(1000), before, answer(turn))  # type: ignore[arg-type]
    assert (reason is not None) is paused
    if reason:
        assert reason == f"token budget spent: {before + turn:,} of 1,000 tokens today (UTC)"
        assert budget_notice(reason).startswith("♥ Heartbeat paused — token budget spent")
    assert budget_reason(state_with(None), 10**9, answer(10**6)) is None  # type: ignore[arg-type]


# -- the store: tokens per UTC day, the pause (SQLite and PostgreSQL) ---------------------------


def fire(store: Store, sid: str, now: datetime, tokens: int, pause: str | None = None) -> int:
    """One fire at ``now`` spending ``tokens``; the tokens spent today before it."""
    begun = begin(store, sid, 1 + len(store.ledger.runs(sid)), now).outcome
    assert isinstance(begun, Started), begun
    run = begun.run
    usage = TokenUsage(tokens - 2, 2, "m")
    store.ledger.finish_fire(
        run.key,
        RunState.COMPLETED,
        run.fence,
        now,
        reply="ok",
        reply_kind="assistant",
        usage=usage,
        pause_reason=pause,
    )
    return begun.spent_today


def test_tokens_count_per_utc_day_and_a_spent_budget_pauses(store: Store) -> None:
    late = datetime.fromisoformat("2026-11-29T23:20:00+00:00")
    sid = store.sessions.create_session(platform="slack", chat="C1", now=late).id
    policy = Policy(exact=True, budget=100, model="llama3")
    store.heartbeats.set_heartbeat(
        sid,
        schedule=IntervalSchedule(600),
        schedule_text="every 10m",
        prompt="p",
        now=late,
        policy=policy,
    )
    assert fire(store, sid, late + timedelta(minutes=10), 60) == 0
    assert fire(store, sid, late + timedelta(minutes=20), 30, pause="spent") == 60
    shown = store.heartbeats.heartbeat_status(sid, late + timedelta(minutes=21))
    assert shown.status == HeartbeatStatus.PAUSED and shown.tokens_today == 90
    view = shown.to_json()
    assert (view["paused_reason"], view["daily_tokens"], view["model"]) == ("spent", 100, "llama3")
    assert "90 of 100 tokens today (UTC)" in replies.status_reply(shown)
    # The next UTC day counts from zero; a person's resume starts it again (it stays paused).
    next_day = store.heartbeats.heartbeat_status(sid, late + timedelta(minutes=40))
    assert next_day.tokens_today == 0 and next_day.status == HeartbeatStatus.PAUSED
    store.heartbeats.resume_heartbeat(sid, late + timedelta(minutes=40))
    assert fire(store, sid, late + timedelta(minutes=50), 10) == 0
    assert (
        store.heartbeats.heartbeat_status(sid, late + timedelta(minutes=51)).to_json()[
            "tokens_today"
        ]
        == 10
    )


def test_a_pause_for_a_heartbeat_set_again_meanwhile_is_ignored(store: Store) -> None:
    sid = store.sessions.create_session(platform="slack", chat="C1", now=T0).id
    kwargs = {"schedule": IntervalSchedule(600), "schedule_text": "every 10m", "prompt": "p"}
    store.heartbeats.set_heartbeat(sid, now=T0, policy=Policy(exact=True, budget=10), **kwargs)  # type: ignore[arg-type]
    now = T0 + timedelta(minutes=10)
    run = start(store, sid, 1, now)
    store.heartbeats.set_heartbeat(sid, now=now, policy=Policy(exact=True, budget=10**6), **kwargs)  # type: ignore[arg-type]
    store.ledger.finish_fire(
        run.key, RunState.COMPLETED, 1, now, reply="ok", reply_kind="assistant", pause_reason="x"
    )
    assert store.heartbeats.heartbeat_status(sid, now).status == HeartbeatStatus.ACTIVE


# -- the surfaces ----------------------------------------------------------------------------


def test_chat_and_cli_set_a_budget_and_a_model(hbgw: Hbgw, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HBGW_ALLOWED_MODELS", "gpt-4o-mini, llama3")
    monkeypatch.setenv("HBGW_HEARTBEAT_DAILY_TOKENS", "25000")
    sid = hbgw("session", "create", "--platform", "slack", "--chat", "C1").out.strip()
    said = hbgw("send", sid, "/heartbeat every 15m check CI")
    assert (
        said.out.strip() == "♥ Heartbeat set (every 15m budget 25k by operator default): check CI"
    )
    status = json.loads(hbgw("heartbeat", "status", sid, "--json").out)
    assert (status["daily_tokens"], status["model"], status["tokens_today"]) == (25000, None, 0)
    cli = hbgw(
        "heartbeat", "set", sid, "--every", "1h", "--budget", "50k", "--model", "llama3", "x"
    )
    assert cli.code == 0, cli.err
    assert "every 1h budget 50k model llama3" in cli.out
    status = json.loads(hbgw("heartbeat", "status", sid, "--json").out)
    assert (status["daily_tokens"], status["model"]) == (50000, "llama3")
    bad = hbgw("heartbeat", "set", sid, "--every", "1h", "--model", "gpt-5", "x")
    assert bad.code == 2 and "allowed models are: gpt-4o-mini, llama3" in bad.err
    bad = hbgw("heartbeat", "set", sid, "--every", "1h", "--budget", "lots", "x")
    assert bad.code == 2 and "is not a token budget" in bad.err
    chat = hbgw("send", sid, "/heartbeat every 1h model gpt-5 x")
    assert "allowed models are" in chat.out + chat.err


def test_the_api_takes_a_budget_and_a_model(api: Api) -> None:
    with api.owner(ALICE) as alice:
        sid = api.new_session(alice)
        body = {"schedule": "every 15m", "prompt": "check CI", "budget": "50k"}
        put = alice.put(f"/v1/sessions/{sid}/heartbeat", json=body)
        assert put.status_code == 200, put.text
        shown = put.json()["heartbeat"]
        assert (shown["daily_tokens"], shown["tokens_today"], shown["model"]) == (50000, 0, None)
        bad = alice.put(f"/v1/sessions/{sid}/heartbeat", json={**body, "model": "gpt-5"})
        assert bad.status_code == 422 and "allows no model choice" in bad.text
        bad = alice.put(f"/v1/sessions/{sid}/heartbeat", json={**body, "budget": "lots"})
        assert bad.status_code == 422 and "is not a token budget" in bad.text


# -- end to end: real beat and worker, the fake model endpoint ----------------------------------


def test_the_turn_that_crosses_the_budget_is_delivered_then_the_heartbeat_pauses(
    tmp_path: Path, redis_url: str, redis_ns: str
) -> None:
    with openai_gateway(tmp_path, redis_url, redis_ns) as (gw, endpoint):
        endpoint.then(Text("CI is green."), Text("CI is still green."), Text("never sent"))
        with gw.worker("w1"):
            sid = gw.session()
            # 18 tokens a turn (11 + 7): the second crosses 30 mid-turn.
            policy = Policy(exact=True, budget=30, model="chosen-model")
            gw.store.heartbeats.set_heartbeat(
                sid,
                schedule=IntervalSchedule(1),
                schedule_text="every 1s",
                prompt="check CI",
                now=utcnow() - timedelta(seconds=2),
                policy=policy,
            )
            gw.rt.due.settle(sid)
            first, second = sent(gw, sid, 2)
            gw.final_runs(sid, 2)
            for _ in range(3):
                gw.tick()
        status = gw.store.heartbeats.heartbeat_status(sid, utcnow())
    assert first == "CI is green."
    assert second == (
        "CI is still green.\n\n♥ Heartbeat paused — token budget spent: 36 of 30 tokens today "
        "(UTC); /heartbeat resume starts it again."
    )
    assert status.status == HeartbeatStatus.PAUSED and status.tokens_today == 36
    assert status.state is not None and "36 of 30" in (status.state.paused_reason or "")
    assert {body["model"] for body in endpoint.requests()} == {"chosen-model"}
    assert len(endpoint.requests()) == 2 and len(gw.runs(sid)) == 2


def sent(gw: Gateway, sid: str, count: int) -> list[str]:
    def texts() -> list[str] | None:
        gw.tick()
        found = [r["text"] for r in gw.deliveries(sid, "send")]
        return found if len(found) >= count else None

    return wait_until(texts, 30, f"{count} heartbeat replies")  # type: ignore[no-any-return]
