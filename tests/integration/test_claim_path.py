"""Beat's claim path, as optimised for big ticks: claims, owner grouping, fire messages.

Ownership is computed by every process (beat groups, workers check, the edge forwards), so the
faster ``Rendezvous`` must give exactly the answers of the original formula, stay balanced, and
move only a departed worker's sessions.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from typing import Any

import redis

from hbgw.beat.core import group_by_owner
from hbgw.state.dispatch import ARGSREPR_FIRES, FIRE_TASK, Dispatcher
from hbgw.state.due_index import DueIndex, _pairs
from hbgw.state.keys import Keys
from hbgw.state.ownership import Rendezvous, rendezvous_owner

SESSIONS = [f"s{i:015x}" for i in range(4000)]


def reference_owner(session_id: str, workers: list[str]) -> str | None:
    """The definition: highest 8-byte BLAKE2b of ``worker NUL session``, first on a tie."""
    best, best_score = None, b""
    for worker in workers:
        score = hashlib.blake2b(f"{worker}\x00{session_id}".encode(), digest_size=8).digest()
        if best is None or score > best_score:
            best, best_score = worker, score
    return best


def test_owner_is_the_reference_rendezvous_hash() -> None:
    for workers in (["w1"], ["w1", "w2"], ["beat-a", "w1", "w2", "w3", "wörker"]):
        owner = Rendezvous(workers).owner
        for sid in [*SESSIONS[:1000], "sé", ""]:
            assert owner(sid) == reference_owner(sid, workers) == rendezvous_owner(sid, workers)
    assert Rendezvous([]).owner("s1") is None


def test_ownership_is_balanced_and_moves_only_a_departed_workers_sessions() -> None:
    workers = ["w1", "w2", "w3", "w4"]
    before = {sid: rendezvous_owner(sid, workers) for sid in SESSIONS}
    shares = Counter(before.values())
    assert set(shares) == set(workers)
    assert min(shares.values()) > len(SESSIONS) / 4 * 0.85
    after = {sid: rendezvous_owner(sid, ["w1", "w2", "w4"]) for sid in SESSIONS}
    moved = {sid for sid in SESSIONS if before[sid] != after[sid]}
    assert moved == {sid for sid in SESSIONS if before[sid] == "w3"}


def test_group_by_owner_keeps_claim_order_per_owner() -> None:
    claims = [(sid, 1000 + i) for i, sid in enumerate(SESSIONS[:500])]
    workers = ["w1", "w2", "w3"]
    groups = group_by_owner(claims, workers)
    for worker, fires in groups.items():
        assert fires == [c for c in claims if reference_owner(c[0], workers) == worker]
    assert sum(len(f) for f in groups.values()) == len(claims)
    assert group_by_owner(claims, []) == {}


def test_claim_all_leases_batches_bigger_than_one_zadd(
    redis_client: redis.Redis, keys: Keys
) -> None:
    index = DueIndex(redis_client, keys, 2)
    due = {sid: 1000 + i % 7 for i, sid in enumerate(SESSIONS[:2600])}
    index.schedule_many(due)
    claimed = index.claim_all(now_ms=2000, lease_ms=5000, limit=1500)
    assert claimed == sorted(due.items(), key=lambda c: (c[1], c[0]))
    assert set(index.due_many(list(due)).values()) == {7000}
    assert index.claim_all(now_ms=2000, lease_ms=5000, limit=1500) == []


def test_claim_replies_parse_bytes_and_exponent_scores() -> None:
    assert _pairs(["a", "1764490000000", "b", "1.7e+12"]) == [
        ("a", 1764490000000),
        ("b", 1700000000000),
    ]
    assert _pairs([b"a", b"12", b"b", b"-5"]) == [("a", 12), ("b", -5)]


class RecordingPublisher:
    def __init__(self) -> None:
        self.sent: list[tuple[str, Any, dict[str, Any]]] = []

    def send_task(self, name: str, args: Any = None, **options: Any) -> None:
        self.sent.append((name, args, options))


def test_fire_message_keeps_its_payload_and_bounds_its_repr() -> None:
    publisher = RecordingPublisher()
    fires = [(sid, 1000) for sid in SESSIONS[:500]]
    Dispatcher(publisher, Keys("ns")).fires("w1", fires)
    Dispatcher(publisher, Keys("ns")).fires("w1", fires[:2])
    (name, args, options), (_, _, small) = publisher.sent
    assert name == FIRE_TASK and options["queue"] == "ns.worker.w1"
    assert [[sid, due] for sid, due in args[0]] == [[sid, due] for sid, due in fires]
    assert options["argsrepr"].endswith(f" +{500 - ARGSREPR_FIRES} more")
    assert f"{SESSIONS[ARGSREPR_FIRES - 1]}:1000" in options["argsrepr"]
    assert small["argsrepr"] == f"fires={[f'{sid}:1000' for sid, _ in fires[:2]]!r}"
