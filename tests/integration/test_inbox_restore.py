"""The inbox scripts against a real server: a message id is queued once, and the restore pass
puts back exactly what Redis lost, in message order (issue 7, defect 2)."""

from __future__ import annotations

import pytest
import redis

from hbgw.state.keys import Keys
from hbgw.state.turn_gate import TurnGate

SID = "sess-1"


@pytest.fixture
def gate(redis_client: redis.Redis, keys: Keys) -> TurnGate:
    return TurnGate(redis_client, keys)


def inbox(client: redis.Redis, keys: Keys, sid: str = SID) -> list[str]:
    return [str(v) for v in client.lrange(keys.inbox(sid), 0, -1)]


def test_an_id_queued_or_in_flight_is_not_queued_again(
    gate: TurnGate, redis_client: redis.Redis, keys: Keys
) -> None:
    assert gate.enqueue_user(SID, "1") == 1
    assert gate.enqueue_user(SID, "1") == 1
    assert gate.pop_message(SID) == "1"
    assert gate.enqueue_user(SID, "1") == 0  # in flight: the turn running it answers it
    assert gate.enqueue_user(SID, "2") == 1
    assert inbox(redis_client, keys) == ["2"]


def test_restore_puts_back_only_what_is_missing_in_message_order(
    gate: TurnGate, redis_client: redis.Redis, keys: Keys
) -> None:
    gate.enqueue_user(SID, "7")
    gate.enqueue_user(SID, "3")
    gate.pop_message(SID)  # 7 is in flight
    gate.seed(SID, 0)
    added = gate.restore_inboxes({SID: [3, 5, 7, 9], "sess-2": [4]})
    assert added == {SID: 2, "sess-2": 1}
    assert inbox(redis_client, keys) == ["3", "5", "9"]
    assert inbox(redis_client, keys, "sess-2") == ["4"]
    assert not gate.is_idle(SID)  # messages wait: no heartbeat may slip in first
    assert redis_client.smembers(keys.inbox_sessions()) == {SID, "sess-2"}


def test_restore_with_nothing_lost_changes_nothing(
    gate: TurnGate, redis_client: redis.Redis, keys: Keys
) -> None:
    gate.enqueue_user(SID, "2")
    gate.enqueue_user(SID, "1")  # a retry's order, as it came: left alone
    assert gate.restore_inboxes({SID: [1, 2]}) == {}
    assert inbox(redis_client, keys) == ["2", "1"]
    assert gate.restore_inboxes({}) == {}


def test_restore_of_a_long_inbox(gate: TurnGate, redis_client: redis.Redis, keys: Keys) -> None:
    ids = list(range(1, 10_001))
    assert gate.restore_inboxes({SID: ids}) == {SID: len(ids)}
    assert inbox(redis_client, keys) == [str(i) for i in ids]
