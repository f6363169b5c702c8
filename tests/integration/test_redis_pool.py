"""A client whose connections are all busy makes the next caller wait, never fail.

redis-py's default pool raised ``MaxConnectionsError: Too many connections`` at its 100th
connection: a worker holding 256 turns at once (``--turns 256``) failed dozens of them, their
lock confirmations included. Real Redis, real threads.
"""

from __future__ import annotations

import threading
import uuid
from pathlib import Path

from support.harness import gateway_settings

from hbgw.state.connection import connect
from hbgw.state.runtime import SPARE_CONNECTIONS, Runtime

CALLERS = 4
CONNECTIONS = 2
HOLD_S = 0.2  # each caller holds its connection this long, server side (BLPOP's timeout)


def test_callers_beyond_the_pool_wait_for_a_connection(redis_url: str) -> None:
    client = connect(redis_url, max_connections=CONNECTIONS)
    errors: list[BaseException] = []
    answers: list[object] = []

    def call() -> None:
        try:
            answers.append(client.blpop([f"nothing-{uuid.uuid4().hex}"], timeout=HOLD_S))
        except BaseException as exc:  # collected: the test reports it
            errors.append(exc)

    threads = [threading.Thread(target=call) for _ in range(CALLERS)]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
    finally:
        client.close()
    assert errors == []
    assert answers == [None] * CALLERS


def test_a_worker_gets_a_connection_for_each_turn_it_holds(
    tmp_path: Path, redis_url: str, redis_ns: str
) -> None:
    settings = gateway_settings(tmp_path, redis_url, redis_ns)
    rt = Runtime.from_settings(settings, worker="w1", turns=256)
    try:
        assert rt.client.connection_pool.max_connections == 256 + SPARE_CONNECTIONS
    finally:
        rt.close()
