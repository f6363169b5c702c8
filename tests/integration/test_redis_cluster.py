"""The state on a Redis Cluster (issue 19): three primaries and three replicas started by the
tests. Every state operation — claims, locks with their fence, inboxes, registries, liveness,
the restore lease, the due index, stream wake-ups — runs on it without a CROSSSLOT error, and
the due shards spread evenly over the primaries (measured)."""

from __future__ import annotations

import asyncio
import uuid
from collections import Counter
from collections.abc import Iterator

import pytest
import redis
from pydantic import ValidationError
from redis.crc import REDIS_CLUSTER_HASH_SLOTS, key_slot
from support.harness import wait_until
from support.redis_cluster import LocalCluster

from hbgw.core.errors import BadInput
from hbgw.core.settings import Settings
from hbgw.state.beat_registry import BeatRegistry
from hbgw.state.cluster import GatewayCluster, is_cluster_client, parse
from hbgw.state.connection import connect
from hbgw.state.due_index import DueIndex
from hbgw.state.keys import Keys, spread_tag
from hbgw.state.liveness import Liveness, Stamp
from hbgw.state.ownership import WorkerRegistry
from hbgw.state.restore_sweep import RestoreSweep
from hbgw.state.stream_wake import StreamWaker, wake_streams
from hbgw.state.turn_gate import Began, Busy, LockLost, TurnEnded

pytestmark = [pytest.mark.timeout(180)]
SHARDS = 16


def test_a_cluster_url_is_read_or_refused_with_a_sentence() -> None:
    where = parse("rediss+cluster://:s3cret@10.0.0.1:7000,10.0.0.2/")
    assert where.nodes == (("10.0.0.1", 7000), ("10.0.0.2", 6379))
    assert (where.tls, where.password) == (True, "s3cret")
    assert parse("redis+cluster://h:1/0").tls is False
    for bad in ("redis+cluster:///", "redis+cluster://:s3cret@h:1/3", "redis+cluster://h:x/"):
        with pytest.raises(BadInput, match=r"redis\+cluster://") as caught:
            parse(bad)
        assert "s3cret" not in str(caught.value)


def test_a_cluster_is_refused_as_the_broker(tmp_path: object) -> None:
    state = "redis+cluster://127.0.0.1:7000/"
    with pytest.raises(ValidationError, match="HBGW_BROKER_URL"):
        Settings(redis_url=state)
    with pytest.raises(ValidationError, match="kombu has no cluster transport"):
        Settings(redis_url="redis://h:1/0", broker_url=state)
    assert Settings(redis_url=state, broker_url="redis://h:1/5").broker_url == "redis://h:1/5"


@pytest.mark.parametrize("shards", [1, 3, 16, 64, 1024])
def test_spread_shards_take_equal_shares_of_the_slot_space(shards: int) -> None:
    for primaries in (3, 5):
        thirds = Counter(
            key_slot(spread_tag(i, shards).encode()) * primaries // REDIS_CLUSTER_HASH_SLOTS
            for i in range(shards)
        )
        assert max(thirds.values()) - min(thirds.values(), default=0) <= 1 or shards < primaries


@pytest.fixture
def cluster_client(shared_redis_cluster: LocalCluster) -> Iterator[GatewayCluster]:
    client = connect(shared_redis_cluster.url)
    assert is_cluster_client(client)
    try:
        yield client  # type: ignore[misc]
    finally:
        client.close()


@pytest.fixture
def ns() -> Keys:
    return Keys(f"c-{uuid.uuid4().hex[:8]}")


def test_locks_with_fencing_and_the_inbox(cluster_client: GatewayCluster, ns: Keys) -> None:
    from hbgw.state.turn_gate import TurnGate

    gate = TurnGate(cluster_client, ns)  # type: ignore[arg-type]
    sid = "s-1"
    first = gate.try_begin_fire(sid, "f1", "tok-a", 5000)
    assert isinstance(first, Began) and first.fence == 1
    assert isinstance(gate.try_begin_fire(sid, "f2", "tok-b", 5000), Busy)
    assert gate.pending(sid) == "f2"
    assert gate.renew(sid, "tok-a", 5000) and not gate.renew(sid, "tok-b", 5000)
    assert gate.renew_many([(sid, "tok-a", 5000), ("s-other", "x", 5000)]) == [True, False]
    ended = gate.next_step(sid, "tok-a", 5000)[0]
    assert isinstance(ended, TurnEnded) and ended.pending_fire == "f2"
    assert isinstance(gate.next_step(sid, "tok-a", 5000)[0], LockLost)  # a stale holder
    second = gate.try_begin_user(sid, "tok-c", 5000)
    assert isinstance(second, Began) and second.fence == 2  # the fence only grows
    assert gate.release(sid, "tok-c") and gate.is_idle(sid)
    assert gate.enqueue_user(sid, "m1") == 1 and gate.enqueue_user(sid, "m1") == 1
    assert gate.pop_message(sid) == "m1" and gate.backlog(sid) == 1
    gate.ack_message(sid, "m1")
    assert gate.restore_inboxes({sid: [7, 8], "s-2": [9]}) == {sid: 2, "s-2": 1}
    assert cluster_client.sismember(ns.inbox_sessions(), "s-2")
    gate.seed_many({sid: 10, "s-2": 4})
    assert (gate.fence(sid), gate.fence("s-2")) == (10, 4)
    gate.set_estop(True)
    assert gate.estop_active("s-2")
    gate.set_estop(False)
    assert not gate.estop_active("s-2")


def test_a_one_slot_transaction_runs(cluster_client: GatewayCluster, ns: Keys) -> None:
    # The API's message rate (hbgw/gateway/api/quotas.py): SET NX, INCR, PTTL in one MULTI.
    key = ns.message_rate("s-1")
    pipe = cluster_client.pipeline(transaction=True)
    pipe.set(key, 0, px=60_000, nx=True)
    pipe.incr(key)
    pipe.pttl(key)
    _started, count, ttl = pipe.execute()
    assert count == 1 and 0 < ttl <= 60_000


def test_the_due_index_and_claims(cluster_client: GatewayCluster, ns: Keys) -> None:
    index = DueIndex(cluster_client, ns, SHARDS)  # type: ignore[arg-type]
    due = {f"s-{i}": 1_000 + i for i in range(2_000)}
    index.schedule_many(due)
    assert index.size() == 2_000
    assert index.due_many(["s-5", "s-9", "absent"]) == {"s-5": 1_005, "s-9": 1_009}
    assert index.earliest_ms() == 1_000
    assert sum(index.backlog(1_499).values()) == 500
    claimed = index.claim_all(5_000, 60_000, 100)
    assert sorted(sid for sid, _ in claimed) == sorted(due)
    assert index.claim_all(5_000, 60_000, 100) == []  # leased, not claimed twice
    assert index.remove("s-1") and index.due_ms("s-1") is None
    # Each shard is one key, so one slot, so one node: a claim is a single-node call, and
    # beat's pipeline of claims is one round trip per primary.
    nodes = Counter(cluster_client.node_of(index.key(s)).name for s in range(SHARDS))
    assert len(nodes) == 3 and max(nodes.values()) - min(nodes.values()) <= 1, nodes
    pool = cluster_client.node_of(index.key(0)).redis_connection.connection_pool
    assert isinstance(pool, redis.BlockingConnectionPool)  # waits for a connection, never fails


def test_claims_of_the_primaries_that_answer_are_kept(
    shared_redis_cluster: LocalCluster, ns: Keys
) -> None:
    # One primary too slow to answer (paused past the client's timeout): the others' claims
    # come back instead of failing with the whole pipeline.
    client: GatewayCluster = connect(shared_redis_cluster.url, lock_lease=1.0)  # type: ignore[assignment]
    index = DueIndex(client, ns, SHARDS)  # type: ignore[arg-type]
    try:
        index.schedule_many({f"s-{i}": 1 for i in range(1_000)})
        slow = client.node_of(index.key(0))
        on_slow = {s for s in range(SHARDS) if client.node_of(index.key(s)) == slow}
        shared_redis_cluster.node(slow.port).client_pause(1500, all=True)
        claimed = index.claim_all(10, 60_000, 500)
        expected = {
            f"s-{i}"
            for i in range(1_000)
            if index.shard_key(f"s-{i}") not in {index.key(s) for s in on_slow}
        }
        names = [sid for sid, _ in claimed]
        # Every claim of the others, none twice; the slow node's timed-out claims may have run
        # late (those members wait for their lease: late, never twice).
        assert expected <= set(names) and len(names) == len(set(names))
    finally:
        client.close()


def test_scripts_in_a_pipeline_survive_an_empty_script_cache(
    shared_redis_cluster: LocalCluster, cluster_client: GatewayCluster, ns: Keys
) -> None:
    # A promoted replica has no scripts (Redis 7 does not replicate SCRIPT LOAD).
    index = DueIndex(cluster_client, ns, SHARDS)  # type: ignore[arg-type]
    index.schedule_many({f"s-{i}": 1 for i in range(50)})
    for port in shared_redis_cluster.alive():
        shared_redis_cluster.node(port).script_flush()
    assert len(index.claim_all(10, 1_000, 10)) == 50


def test_the_drain_steps_are_one_slot_and_survive_an_empty_script_cache(
    shared_redis_cluster: LocalCluster, cluster_client: GatewayCluster, ns: Keys
) -> None:
    """The drain's begin and step go by sha in pipelines with commands of other slots (the
    global stop, the due index); a node without scripts falls back to loading them."""
    from hbgw.state.turn_gate import Began, NextMessage, Stopped, TurnEnded, TurnGate

    gate = TurnGate(cluster_client, ns)  # type: ignore[arg-type]
    index = DueIndex(cluster_client, ns, SHARDS)  # type: ignore[arg-type]
    sid = "s-drain"
    gate.enqueue_user(sid, "m1")
    gate.enqueue_user(sid, "m2")
    for port in shared_redis_cluster.alive():
        shared_redis_cluster.node(port).script_flush()
    began = gate.try_begin_drain(sid, "tok", 5000)
    assert isinstance(began, Began) and began.first == NextMessage("m1")
    due = index.shard_key(sid)
    step, errors = gate.next_step(
        sid, "tok", 5000, ack="m1", first=lambda pipe: pipe.zadd(due, {sid: 7})
    )
    assert (step, errors) == (NextMessage("m2"), []) and index.due_ms(sid) == 7
    gate.enqueue_user(sid, "m3")
    gate.set_estop(True)  # the global stop: another slot, read beside the script
    assert gate.next_step(sid, "tok", 5000, ack="m2")[0] == Stopped()
    gate.set_estop(False)
    assert gate.inbox_length(sid) == gate.backlog(sid) == 1  # m3 is back, waiting
    assert gate.lock_holder(sid) is None
    assert gate.pop_message(sid) == "m3"
    gate.ack_message(sid, "m3")
    began = gate.try_begin_drain(sid, "tok-b", 5000)
    assert isinstance(began, Began)
    assert gate.next_step(sid, "tok-b", 5000)[0] == TurnEnded(released=True, pending_fire=None)


def test_registries_liveness_and_the_restore_lease(
    cluster_client: GatewayCluster, ns: Keys
) -> None:
    workers = WorkerRegistry(cluster_client, ns, ttl_ms=10_000)  # type: ignore[arg-type]
    assert workers.claim("w1", 1_000) is None and workers.claim("w1", 2_000) == 1_000
    workers.refresh("w2", 1_000)
    assert workers.live(5_000) == ["w1", "w2"] and workers.owner("s-1", 5_000) in ("w1", "w2")
    beats = BeatRegistry(cluster_client, ns, ttl_ms=10_000)  # type: ignore[arg-type]
    assert beats.refresh_and_list("b1", 1_000) == ["b1"]
    liveness = Liveness(cluster_client, ns)  # type: ignore[arg-type]
    liveness.stamp("s-1", 1_000, "turn", "w1")
    (stamp,) = liveness.all()
    assert stamp == Stamp("s-1", 1_000, "turn", "w1") and liveness.clear(stamp)
    sweep = RestoreSweep(cluster_client, ns)  # type: ignore[arg-type]
    assert sweep.acquire("t1", 5_000) and not sweep.acquire("t2", 5_000)
    assert sweep.commit("t1", {"epoch": 1_000, "steps": 3})
    assert (sweep.read().epoch_ms, sweep.read().steps) == (1_000, 3)


def test_stream_wake_ups_cross_the_cluster(
    shared_redis_cluster: LocalCluster, cluster_client: GatewayCluster, ns: Keys
) -> None:
    # Classic pub/sub: a message published on any node reaches subscribers on every node.
    waker = StreamWaker(connect(shared_redis_cluster.url, retry=False), ns)

    async def woken() -> bool:
        watch = waker.watch("s-1")
        waker.start()
        try:
            await asyncio.sleep(0)
            deadline = asyncio.get_running_loop().time() + 20
            while asyncio.get_running_loop().time() < deadline:
                watch.clear()
                wake_streams(cluster_client, ns, "s-1")  # type: ignore[arg-type]
                if await watch.wait(0.2):
                    return True
            return False
        finally:
            watch.close()
            waker.stop()

    assert asyncio.run(woken())


def test_the_due_index_spreads_over_the_primaries(
    shared_redis_cluster: LocalCluster, cluster_client: GatewayCluster, ns: Keys
) -> None:
    index = DueIndex(cluster_client, ns, SHARDS)  # type: ignore[arg-type]
    sessions = 30_000
    due = {uuid.uuid4().hex: 1_800_000_000_000 + i for i in range(sessions)}
    for start in range(0, sessions, 5_000):
        index.schedule_many(dict(list(due.items())[start : start + 5_000]))
    per_node: dict[str, list[int]] = {}
    for shard in range(SHARDS):
        key = index.key(shard)
        node = cluster_client.node_of(key)
        cell = per_node.setdefault(node.name, [0, 0, 0])
        cell[0] += 1
        cell[1] += int(cluster_client.zcard(key))
        cell[2] += int(cluster_client.memory_usage(key) or 0)
    for name, (shards, count, size) in sorted(per_node.items()):
        print(f"due index on {name}: {shards} shards, {count} members, {size} bytes")
    members = [cell[1] for cell in per_node.values()]
    assert len(per_node) == 3 and sum(members) == sessions
    # 16 shards over three primaries: 6/5/5 at best, so the members 1.2 : 1 : 1.
    assert max(members) / min(members) < 1.35, per_node
    wait_until(lambda: index.size() == sessions, 5, "the index size")
