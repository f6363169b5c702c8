"""The Redis layer against a real server: key layout, due-index claims, session-state scripts."""

from __future__ import annotations

import socket
import threading
from collections import Counter
from collections.abc import Iterator
from importlib.resources import files
from typing import Any

import pytest
import redis
from redis.crc import key_slot

from core.errors import BadInput, HbgwError
from state.connection import connect, ping_or_error
from state.due_index import DueIndex
from state.keys import Keys, shard_of
from state.scripts import load_script, read_script
from state.turn_gate import Began, Busy, KeepLock, LockLost, TurnEnded, TurnGate

NOW = 1_700_000_000_000
LEASE = 60_000
SID = "sess-1"
TOKEN = "tok-a"
OTHER = "tok-b"
LOCK_MS = 30_000

SCRIPTS = [
    ("state", "lua/claim_due.lua"),
    ("state", "lua/enqueue_user.lua"),
    ("state", "lua/try_begin.lua"),
    ("state", "lua/end_turn.lua"),
    ("state", "lua/lock_renew.lua"),
    ("state", "lua/lock_release.lua"),
    ("state", "lua/seed_session.lua"),
]


def slot(key: str) -> int:
    return key_slot(key.encode())


@pytest.fixture
def state(redis_client: redis.Redis, keys: Keys) -> TurnGate:
    return TurnGate(redis_client, keys)


@pytest.fixture
def index(redis_client: redis.Redis, keys: Keys) -> DueIndex:
    return DueIndex(redis_client, keys, shards=1)


# -- keys ---------------------------------------------------------------------------------------


def test_key_layout() -> None:
    k = Keys("hbgw")
    assert k.lock("abc") == "hbgw:{s:abc}:lock"
    assert k.fence("abc") == "hbgw:{s:abc}:fence"
    assert k.estop("abc") == "hbgw:{s:abc}:estop"
    assert k.estop() == "hbgw:estop"
    assert k.due_shard(3) == "hbgw:{due:3}"
    assert k.workers() == "hbgw:workers"
    assert k.inbox_sessions() == "hbgw:inbox_sessions"
    assert k.liveness() == "hbgw:liveness"
    assert k.worker_queue("w1") == "hbgw.worker.w1"


@pytest.mark.parametrize("sid", ["abc", "a:b", "with{brace}", "ünïcode", "x}y{z"])
def test_session_keys_share_one_slot(sid: str) -> None:
    k = Keys("hbgw")
    session_keys = [k.lock(sid), k.fence(sid), k.idle(sid), k.inbox(sid), k.pending(sid)]
    session_keys.append(k.estop(sid))
    assert len({slot(key) for key in session_keys}) == 1


def test_namespace_with_braces_is_rejected() -> None:
    with pytest.raises(BadInput, match="namespace"):
        Keys("hb{gw}")
    with pytest.raises(BadInput):
        Keys("")


def test_shard_of_is_stable_and_in_range() -> None:
    assert shard_of("abc", 16) == shard_of("abc", 16)
    # Pinned: every replica and every release must put a session in the same shard.
    assert shard_of("abc", 16) == 0x352441C2 % 16
    assert {shard_of(f"s{i}", 8) for i in range(200)} == set(range(8))


@pytest.mark.parametrize(("package", "name"), SCRIPTS)
def test_every_script_has_a_header(package: str, name: str) -> None:
    lines = read_script(package, name).splitlines()
    header = "\n".join(line for line in lines[: lines.index("")] if line.startswith("--"))
    assert len(header.splitlines()) == lines.index("")  # one unbroken comment block
    for word in ("KEYS[1]", "ARGV[1]", "Returns"):
        assert word in header


def test_every_lua_file_is_listed() -> None:
    lua_dir = files("state").joinpath("lua")
    shipped = {("state", f"lua/{p.name}") for p in lua_dir.iterdir() if p.name.endswith(".lua")}
    assert shipped == set(SCRIPTS)


def test_scripts_are_cached_per_client(redis_client: redis.Redis, redis_url: str) -> None:
    first = load_script(redis_client, "state", "lua/claim_due.lua")
    assert load_script(redis_client, "state", "lua/claim_due.lua") is first
    other = connect(redis_url)
    try:
        assert load_script(other, "state", "lua/claim_due.lua") is not first
    finally:
        other.close()


def test_missing_script_is_an_actionable_error() -> None:
    with pytest.raises(HbgwError, match="reinstall"):
        read_script("beat", "nope.lua")


class EvalSpy:
    """Records the keys of every EVALSHA a client sends."""

    def __init__(self, client: redis.Redis, monkeypatch: pytest.MonkeyPatch) -> None:
        self.calls: list[list[str]] = []
        self.shas: set[str] = set()
        real = client.evalsha

        def evalsha(sha: str, numkeys: int, *keys_and_args: Any) -> Any:
            self.shas.add(sha)
            self.calls.append([str(k) for k in keys_and_args[:numkeys]])
            return real(sha, numkeys, *keys_and_args)

        monkeypatch.setattr(client, "evalsha", evalsha)


def test_every_script_call_stays_in_one_slot(
    redis_client: redis.Redis, keys: Keys, monkeypatch: pytest.MonkeyPatch
) -> None:
    state = TurnGate(redis_client, keys)
    index = DueIndex(redis_client, keys, shards=4)
    spy = EvalSpy(redis_client, monkeypatch)
    state.seed(SID, 0)
    state.try_begin_fire(SID, "f1", TOKEN, LOCK_MS)
    state.try_begin_user(SID, TOKEN, LOCK_MS)
    state.renew(SID, TOKEN, LOCK_MS)
    state.end_turn(SID, TOKEN, LOCK_MS)
    state.release(SID, TOKEN)
    state.enqueue_user(SID, "m1")  # pipelined: checked through its keys below
    for shard in range(4):
        index.claim(shard, NOW, LEASE, 10)
    assert len(spy.shas) == 6  # every script but the pipelined enqueue_user
    for call_keys in spy.calls:
        assert len({slot(key) for key in call_keys}) == 1, call_keys
    assert slot(keys.inbox(SID)) == slot(keys.idle(SID))


# -- due index ----------------------------------------------------------------------------------


def test_claim_respects_now_and_limit(index: DueIndex) -> None:
    index.schedule_many({"a": NOW - 300, "b": NOW - 200, "c": NOW - 100, "later": NOW + 1})
    assert index.claim(0, NOW, LEASE, limit=2) == [("a", NOW - 300), ("b", NOW - 200)]
    assert index.claim(0, NOW, LEASE, limit=2) == [("c", NOW - 100)]
    assert index.claim(0, NOW, LEASE, limit=2) == []
    assert index.due_ms("later") == NOW + 1


def test_claim_leases_and_expired_lease_is_claimable_again(index: DueIndex) -> None:
    index.schedule("a", NOW)
    assert index.claim(0, NOW, LEASE, 10) == [("a", NOW)]
    assert index.due_ms("a") == NOW + LEASE
    assert index.claim(0, NOW + LEASE - 1, LEASE, 10) == []
    # Nobody settled the claim: it is due again when the lease ends, at the lease time.
    assert index.claim(0, NOW + LEASE, LEASE, 10) == [("a", NOW + LEASE)]
    assert index.due_ms("a") == NOW + 2 * LEASE


def test_schedule_overwrites_a_lease(index: DueIndex) -> None:
    index.schedule("a", NOW)
    index.claim(0, NOW, LEASE, 10)
    index.schedule("a", NOW + 5)  # settled: next due time
    assert index.due_ms("a") == NOW + 5


def test_claim_keeps_every_digit_of_large_timestamps(index: DueIndex) -> None:
    big = 9_007_199_254_740  # 16 digits with the lease added: past Lua's default precision
    index.schedule("a", big)
    index.claim(0, big, 1_234_567, 10)
    assert index.due_ms("a") == big + 1_234_567


def test_remove_size_and_earliest(redis_client: redis.Redis, keys: Keys) -> None:
    index = DueIndex(redis_client, keys, shards=4)
    assert index.earliest_ms() is None
    assert index.size() == 0
    index.schedule_many({f"s{i}": NOW + i for i in range(40)})
    assert index.size() == 40
    assert index.earliest_ms() == NOW
    assert index.remove("s0") is True
    assert index.remove("s0") is False
    assert index.due_ms("s0") is None
    assert index.earliest_ms() == NOW + 1
    index.schedule_many({})
    assert index.size() == 39


def test_claim_all_drains_every_shard_in_batches(redis_client: redis.Redis, keys: Keys) -> None:
    index = DueIndex(redis_client, keys, shards=4)
    due = {f"s{i}": NOW - i for i in range(103)}
    index.schedule_many(due | {"future": NOW + 10})
    claimed = index.claim_all(NOW, LEASE, limit=5)
    assert sorted(claimed) == sorted(due.items())
    assert [c[1] for c in claimed] == sorted(c[1] for c in claimed)
    assert index.claim_all(NOW, LEASE, limit=5) == []
    assert index.due_ms("future") == NOW + 10


def test_concurrent_claimers_never_share_a_member(redis_url: str, keys: Keys) -> None:
    setup = connect(redis_url)
    members = {f"s{i}": NOW - i for i in range(1500)}
    DueIndex(setup, keys, shards=3).schedule_many(members)
    results: list[list[tuple[str, int]]] = [[] for _ in range(6)]
    barrier = threading.Barrier(len(results))

    def claimer(slot_: int) -> None:
        client = connect(redis_url)
        index = DueIndex(client, keys, shards=3)
        barrier.wait()
        try:
            while True:
                got = [c for shard in range(3) for c in index.claim(shard, NOW, LEASE, 7)]
                if not got:
                    return
                results[slot_].extend(got)
        finally:
            client.close()

    threads = [threading.Thread(target=claimer, args=(i,)) for i in range(len(results))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    setup.close()
    counts = Counter(sid for batch in results for sid, _ in batch)
    assert set(counts) == set(members)
    assert max(counts.values()) == 1


def test_claim_rejects_bad_arguments(index: DueIndex) -> None:
    with pytest.raises(ValueError, match="lease_ms"):
        index.claim(0, NOW, 0, 10)
    with pytest.raises(ValueError, match="limit"):
        index.claim_all(NOW, LEASE, 0)
    with pytest.raises(ValueError, match="shard"):
        index.claim(1, NOW, LEASE, 10)


# -- try_begin ----------------------------------------------------------------------------------


def test_fire_on_fresh_session_counts_as_idle(state: TurnGate) -> None:
    # No idle flag at all (a worker died mid-turn, or Redis restarted): free lock + empty inbox.
    assert not state.is_idle(SID)
    assert state.try_begin_fire(SID, "f1", TOKEN, LOCK_MS) == Began(fence=1)
    assert state.lock_holder(SID) == TOKEN
    assert state.pending(SID) is None


def test_fire_takes_lock_with_lease_and_clears_idle(
    state: TurnGate, redis_client: redis.Redis, keys: Keys
) -> None:
    state.seed(SID, 0)
    assert state.is_idle(SID)
    state.try_begin_fire(SID, "f1", TOKEN, LOCK_MS)
    assert not state.is_idle(SID)
    assert 0 < redis_client.pttl(keys.lock(SID)) <= LOCK_MS


def test_fire_on_busy_session_becomes_pending_and_newer_replaces_older(
    state: TurnGate,
) -> None:
    state.try_begin_user(SID, TOKEN, LOCK_MS)
    assert state.try_begin_fire(SID, "f1", OTHER, LOCK_MS) == Busy("busy")
    assert state.pending(SID) == "f1"
    assert state.try_begin_fire(SID, "f2", OTHER, LOCK_MS) == Busy("busy")
    assert state.pending(SID) == "f2"
    assert state.lock_holder(SID) == TOKEN
    assert state.fence(SID) == 1


def test_fire_waits_for_queued_user_messages(state: TurnGate) -> None:
    state.enqueue_user(SID, "m1")
    assert state.try_begin_fire(SID, "f1", TOKEN, LOCK_MS) == Busy("inbox")
    assert state.pending(SID) == "f1"
    assert state.lock_holder(SID) is None
    assert state.fence(SID) == 0


def test_fire_coalesces_pending_and_fences_increase(state: TurnGate) -> None:
    state.try_begin_user(SID, TOKEN, LOCK_MS)
    state.try_begin_fire(SID, "f-old", OTHER, LOCK_MS)
    assert state.end_turn(SID, TOKEN, LOCK_MS) == TurnEnded(released=True, pending_fire="f-old")
    state.try_begin_fire(SID, "f-late", OTHER, LOCK_MS)  # idle again, takes the lock
    assert state.pending(SID) is None
    assert state.fence(SID) == 2
    state.end_turn(SID, OTHER, LOCK_MS)
    assert state.try_begin_fire(SID, "f3", TOKEN, LOCK_MS) == Began(fence=3)


def test_taking_the_lock_consumes_a_pending_fire(state: TurnGate) -> None:
    state.enqueue_user(SID, "m1")
    state.try_begin_fire(SID, "f1", TOKEN, LOCK_MS)
    state.ack_message(SID, state.pop_message(SID) or "")
    assert state.try_begin_fire(SID, "f2", TOKEN, LOCK_MS) == Began(fence=1)
    assert state.pending(SID) is None


def test_user_mode(state: TurnGate) -> None:
    state.enqueue_user(SID, "m1")
    assert state.try_begin_user(SID, OTHER, LOCK_MS) == Began(fence=1)  # inbox does not block
    assert state.lock_holder(SID) == OTHER
    state.try_begin_fire(SID, "f1", TOKEN, LOCK_MS)
    assert state.try_begin_user(SID, TOKEN, LOCK_MS) == Busy("busy")
    assert state.pending(SID) == "f1"  # user mode never touches the pending fire
    state.ack_message(SID, state.pop_message(SID) or "")
    state.end_turn(SID, OTHER, LOCK_MS)
    assert state.try_begin_user(SID, TOKEN, LOCK_MS) == Began(fence=2)


def test_unknown_mode_is_an_error(state: TurnGate, redis_client: redis.Redis) -> None:
    script = load_script(redis_client, "state", "lua/try_begin.lua")
    k = state.keys
    session_keys = [
        k.lock(SID),
        k.fence(SID),
        k.idle(SID),
        k.inbox(SID),
        k.pending(SID),
        k.inflight(SID),
    ]
    with pytest.raises(redis.ResponseError, match='mode must be "fire" or "user", got nap'):
        script(keys=session_keys, args=[TOKEN, LOCK_MS, "f", "nap"])
    # Refused before any write: no lock, no fence, no pending fire.
    assert redis_client.exists(*session_keys) == 0


def test_lease_must_be_positive(state: TurnGate) -> None:
    with pytest.raises(ValueError, match="lease_ms"):
        state.try_begin_user(SID, TOKEN, 0)


# -- end_turn -----------------------------------------------------------------------------------


def test_end_turn_keeps_lock_while_inbox_is_not_empty(
    state: TurnGate, redis_client: redis.Redis, keys: Keys
) -> None:
    state.try_begin_user(SID, TOKEN, 50)
    state.enqueue_user(SID, "m1")
    assert state.end_turn(SID, TOKEN, LOCK_MS) == KeepLock()
    assert state.lock_holder(SID) == TOKEN
    assert redis_client.pttl(keys.lock(SID)) > 50  # renewed to the new lease
    assert not state.is_idle(SID)


def test_end_turn_goes_idle_without_pending(state: TurnGate) -> None:
    state.try_begin_user(SID, TOKEN, LOCK_MS)
    assert state.end_turn(SID, TOKEN, LOCK_MS) == TurnEnded(released=True, pending_fire=None)
    assert state.is_idle(SID)
    assert state.lock_holder(SID) is None


def test_end_turn_hands_back_the_pending_fire(state: TurnGate) -> None:
    state.try_begin_user(SID, TOKEN, LOCK_MS)
    state.try_begin_fire(SID, "f1", OTHER, LOCK_MS)
    assert state.end_turn(SID, TOKEN, LOCK_MS) == TurnEnded(released=True, pending_fire="f1")
    assert state.pending(SID) is None
    assert state.is_idle(SID)


def test_end_turn_with_a_lost_lock_changes_nothing(state: TurnGate) -> None:
    state.try_begin_user(SID, OTHER, LOCK_MS)
    state.try_begin_fire(SID, "f1", TOKEN, LOCK_MS)
    assert state.end_turn(SID, TOKEN, LOCK_MS) == LockLost()
    assert state.lock_holder(SID) == OTHER
    assert state.pending(SID) == "f1"
    assert state.end_turn("never-locked", TOKEN, LOCK_MS) == LockLost()


# -- renew / release ----------------------------------------------------------------------------


def test_renew_compares_token(state: TurnGate, redis_client: redis.Redis, keys: Keys) -> None:
    state.try_begin_user(SID, TOKEN, 50)
    assert state.renew(SID, OTHER, LOCK_MS) is False
    assert redis_client.pttl(keys.lock(SID)) <= 50
    assert state.renew(SID, TOKEN, LOCK_MS) is True
    assert redis_client.pttl(keys.lock(SID)) > 50
    assert state.renew("never-locked", TOKEN, LOCK_MS) is False


def test_release_compares_token(state: TurnGate) -> None:
    state.try_begin_user(SID, TOKEN, LOCK_MS)
    assert state.release(SID, OTHER) is False
    assert state.lock_holder(SID) == TOKEN
    assert state.release(SID, TOKEN) is True
    assert state.lock_holder(SID) is None
    assert state.release(SID, TOKEN) is False
    # Released without idle flag: the next fire still starts.
    assert state.try_begin_fire(SID, "f1", TOKEN, LOCK_MS) == Began(fence=2)


# -- seed ---------------------------------------------------------------------------------------


def test_seed_sets_a_missing_fence_and_idle(state: TurnGate) -> None:
    assert state.seed(SID, 41) == 41
    assert state.fence(SID) == 41
    assert state.is_idle(SID)
    assert state.try_begin_fire(SID, "f1", TOKEN, LOCK_MS) == Began(fence=42)


def test_seed_raises_but_never_lowers_the_fence(state: TurnGate) -> None:
    state.seed(SID, 10)
    assert state.seed(SID, 20) == 20
    assert state.seed(SID, 5) == 20
    assert state.fence(SID) == 20


def test_seed_leaves_idle_alone_while_busy_or_queued(state: TurnGate) -> None:
    state.try_begin_user(SID, TOKEN, LOCK_MS)
    state.seed(SID, 0)
    assert not state.is_idle(SID)
    state.release(SID, TOKEN)
    state.enqueue_user(SID, "m1")
    state.seed(SID, 0)
    assert not state.is_idle(SID)
    assert state.fence(SID) == 1


# -- inbox and estop ----------------------------------------------------------------------------


def test_inbox_is_fifo_clears_idle_and_records_hint(
    state: TurnGate, redis_client: redis.Redis, keys: Keys
) -> None:
    state.seed(SID, 0)
    assert state.enqueue_user(SID, "m1") == 1
    assert state.enqueue_user(SID, "m2") == 2
    assert not state.is_idle(SID)
    assert redis_client.sismember(keys.inbox_sessions(), SID)
    assert state.inbox_length(SID) == 2
    assert state.pop_message(SID) == "m1"
    assert state.pop_message(SID) == "m2"
    assert state.pop_message(SID) is None
    assert state.backlog(SID) == 2  # taken, not yet answered
    state.ack_message(SID, "m1")
    assert state.backlog(SID) == 1


def test_messages_of_a_dead_turn_go_back_to_the_inbox_first(state: TurnGate) -> None:
    state.enqueue_user(SID, "m1")
    state.enqueue_user(SID, "m2")
    assert state.try_begin_user(SID, OTHER, LOCK_MS) == Began(fence=1)
    assert state.pop_message(SID) == "m1"
    state.release(SID, OTHER)  # as if its lease ran out
    # A fire sees the recovered message and waits; the next drain answers m1 before m2.
    assert state.try_begin_fire(SID, "f1", TOKEN, LOCK_MS) == Busy("inbox")
    assert state.try_begin_user(SID, TOKEN, LOCK_MS) == Began(fence=2)
    assert state.pop_message(SID) == "m1"
    assert state.pop_message(SID) == "m2"


def test_estop_global_and_per_session(state: TurnGate) -> None:
    assert not state.estop_active(SID)
    state.set_estop(True, SID)
    assert state.estop_active(SID)
    assert not state.estop_active("other")
    state.set_estop(True)
    assert state.estop_active("other")
    state.set_estop(False)
    assert not state.estop_active("other")
    assert state.estop_active(SID)
    state.set_estop(False, SID)
    assert not state.estop_active(SID)


# -- connection ---------------------------------------------------------------------------------


@pytest.fixture
def dead_url() -> Iterator[str]:
    with socket.socket() as sock:  # bound, never listening: connections are refused
        sock.bind(("127.0.0.1", 0))
        yield f"redis://:secret@127.0.0.1:{sock.getsockname()[1]}/0"


def test_ping_or_error_says_what_to_do(dead_url: str) -> None:
    client = connect(dead_url)
    try:
        with pytest.raises(HbgwError, match="unset HBGW_REDIS_URL") as caught:
            ping_or_error(client, dead_url)
    finally:
        client.close()
    assert "secret" not in str(caught.value)
    assert "Cannot reach Redis at redis://" in str(caught.value)


def test_ping_or_error_passes_on_a_live_server(redis_client: redis.Redis) -> None:
    def pings() -> int:
        return int(redis_client.info("commandstats").get("cmdstat_ping", {}).get("calls", 0))

    before = pings()
    ping_or_error(redis_client)  # no HbgwError: the server answered
    assert pings() > before  # it did ask the server, not only build a client


def test_seed_many_matches_seed(state: TurnGate) -> None:
    state.try_begin_user("busy", TOKEN, LOCK_MS)  # fence 1, locked: not marked idle
    state.seed_many({SID: 7, "busy": 3, "fresh": 0})
    assert (state.fence(SID), state.fence("busy"), state.fence("fresh")) == (7, 3, 0)
    assert state.is_idle(SID) and state.is_idle("fresh") and not state.is_idle("busy")
