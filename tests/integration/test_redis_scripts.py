"""The Redis layer against a real server: key layout, Lua scripts, due-index claims, connection."""

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

from hbgw.core.errors import BadInput, HbgwError
from hbgw.state.connection import connect, ping_or_error
from hbgw.state.due_index import ClaimRound, DueIndex
from hbgw.state.keys import Keys, shard_of
from hbgw.state.restore_sweep import RestoreSweep
from hbgw.state.scripts import load_script, read_script
from hbgw.state.turn_gate import TurnGate

NOW = 1_700_000_000_000
LEASE = 60_000
SID = "sess-1"
TOKEN = "tok-a"
LOCK_MS = 30_000

SCRIPTS = [
    ("hbgw.state", "lua/claim_due.lua"),
    ("hbgw.state", "lua/enqueue_user.lua"),
    ("hbgw.state", "lua/try_begin.lua"),
    ("hbgw.state", "lua/next_step.lua"),
    ("hbgw.state", "lua/lock_renew.lua"),
    ("hbgw.state", "lua/lock_release.lua"),
    ("hbgw.state", "lua/seed_session.lua"),
    ("hbgw.state", "lua/claim_worker.lua"),
    ("hbgw.state", "lua/restore_inbox.lua"),
    ("hbgw.state", "lua/restore_commit.lua"),
]


def slot(key: str) -> int:
    return key_slot(key.encode())


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
    assert k.restore_sweep() == "hbgw:{restore}:sweep"
    assert k.restore_lease() == "hbgw:{restore}:lease"


@pytest.mark.parametrize("sid", ["abc", "a:b", "with{brace}", "ünïcode", "x}y{z"])
def test_session_keys_share_one_slot(sid: str) -> None:
    k = Keys("hbgw")
    session_keys = [k.lock(sid), k.fence(sid), k.inflight(sid), k.inbox(sid), k.pending(sid)]
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
    lua_dir = files("hbgw.state").joinpath("lua")
    shipped = {
        ("hbgw.state", f"lua/{p.name}") for p in lua_dir.iterdir() if p.name.endswith(".lua")
    }
    assert shipped == set(SCRIPTS)


def test_scripts_are_cached_per_client(redis_client: redis.Redis, redis_url: str) -> None:
    first = load_script(redis_client, "hbgw.state", "lua/claim_due.lua")
    assert load_script(redis_client, "hbgw.state", "lua/claim_due.lua") is first
    other = connect(redis_url)
    try:
        assert load_script(other, "hbgw.state", "lua/claim_due.lua") is not first
    finally:
        other.close()


def test_missing_script_is_an_actionable_error() -> None:
    with pytest.raises(HbgwError, match="reinstall"):
        read_script("hbgw.beat", "nope.lua")


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
    state.release(SID, TOKEN)
    state.enqueue_user(SID, "m1")  # pipelined: checked through its keys below
    state.restore_inboxes({SID: [1]})  # pipelined too
    for shard in range(4):
        index.claim(shard, NOW, LEASE, 10)
    sweep = RestoreSweep(redis_client, keys)
    assert sweep.acquire(TOKEN, LOCK_MS)
    assert sweep.commit(TOKEN, {"cursor": "s1"})
    # Every script but the pipelined enqueue_user, restore_inbox and next_step (sent by sha in
    # the drain's pipeline: its keys are checked below).
    assert len(spy.shas) == 6
    for call_keys in spy.calls:
        assert len({slot(key) for key in call_keys}) == 1, call_keys
    assert slot(keys.inbox(SID)) == slot(keys.inflight(SID))
    step_keys = [keys.lock(SID), keys.inbox(SID), keys.inflight(SID), keys.pending(SID)]
    step_keys += [keys.pending_jobs(SID), keys.estop(SID)]
    assert len({slot(key) for key in step_keys}) == 1


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


def test_a_claim_round_reads_the_earliest_left_and_survives_lost_scripts(
    redis_client: redis.Redis, keys: Keys
) -> None:
    index = DueIndex(redis_client, keys, shards=4)
    index.schedule_many({f"s{i}": NOW - 10 * i for i in range(9)} | {"later": NOW + 7})
    redis_client.script_flush()  # a Redis that restarted: the claim's sha is unknown to it
    first = index.claim_round(NOW, LEASE, limit=2)
    assert sorted(m for m, _ in first.claims) == [f"s{i}" for i in range(9)]  # full batches too
    assert first.earliest_ms == NOW + 7 == index.earliest_ms()
    assert index.claim_round(NOW + 7, LEASE, limit=2) == ClaimRound(
        [("later", NOW + 7)], NOW + LEASE
    )
    index.schedule_many({m: NOW + LEASE + 1 for m, _ in first.claims} | {"later": NOW + LEASE + 1})
    assert index.claim_round(NOW, LEASE, limit=2, shards=[0]).earliest_ms == index.earliest_ms([0])


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


def test_due_many_reads_every_shard_and_omits_the_absent(
    redis_client: redis.Redis, keys: Keys
) -> None:
    index = DueIndex(redis_client, keys, shards=4)
    index.schedule_many({f"s{i}": NOW + i for i in range(0, 40, 2)})
    asked = [f"s{i}" for i in range(40)]
    assert index.due_many(asked, chunk=7) == {f"s{i}": NOW + i for i in range(0, 40, 2)}
    assert index.due_many([]) == {}


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
