"""The broker apart from the state (issue 19): Celery's messages on the RabbitMQ these machines
run, the state in Redis. Real workers consume their queues on RabbitMQ; beat's fires and the
edges' drains reach them there; nothing of Celery's is written to the state Redis."""

from __future__ import annotations

from pathlib import Path

import redis
from support.harness import Gateway, gateway_settings, wait_until
from support.rabbitmq import queue_type
from support.scenarios import send

from hbgw.gateway.inbound import Queued
from hbgw.sessions.states import RunState


def rabbit_gateway(tmp_path: Path, redis_url: str, ns: str, amqp_url: str) -> Gateway:
    settings = gateway_settings(tmp_path, redis_url, ns, agent="echo", broker_url=amqp_url)
    return Gateway(settings, redis_url)


def test_fires_and_messages_travel_through_rabbitmq(
    tmp_path: Path, redis_url: str, redis_ns: str, redis_client: redis.Redis, amqp_url: str
) -> None:
    gw = rabbit_gateway(tmp_path, redis_url, redis_ns, amqp_url)
    try:
        assert gw.app.connection_for_write().transport.driver_type == "amqp"
        with gw.worker("w1"):
            sid = gw.session()
            gw.due_now(sid)
            gw.tick()
            [run] = gw.final_runs(sid)
            assert run.state == RunState.COMPLETED
            queued = send(gw, sid, "hello over amqp")
            assert isinstance(queued, Queued)
            wait_until(lambda: gw.store.messages.reply_for(queued.message_id), what="the reply")
        assert queue_type(f"{redis_ns}.worker.w1") == "quorum"
        assert [d["kind"] for d in gw.deliveries(sid, "send")] == ["heartbeat", "reply"]
    finally:
        gw.close()
    # The state Redis holds the gateway's state only: no queue, no Celery key.
    assert not list(redis_client.scan_iter(match=f"{redis_ns}:celery:*", count=1000))


def test_a_fire_sent_before_its_worker_started_waits_in_its_queue(
    tmp_path: Path, redis_url: str, redis_ns: str, amqp_url: str
) -> None:
    """RabbitMQ drops a message routed to a queue that does not exist; the dispatcher declares
    the worker's queue as it sends, so a fire for a worker that is still starting waits."""
    gw = rabbit_gateway(tmp_path, redis_url, redis_ns, amqp_url)
    try:
        sid = gw.session()
        gw.due_now(sid)
        gw.rt.registry.refresh("w1", gw.rt.now_ms())  # w1 is live but not consuming yet
        gw.tick()
        assert queue_type(f"{redis_ns}.worker.w1") == "quorum"
        assert gw.runs(sid) == []
        with gw.worker("w1"):
            [run] = gw.final_runs(sid)
        assert run.state == RunState.COMPLETED
    finally:
        gw.close()


def test_classic_queues_when_quorum_is_off(
    tmp_path: Path, redis_url: str, redis_ns: str, amqp_url: str
) -> None:
    settings = gateway_settings(
        tmp_path, redis_url, redis_ns, agent="echo", broker_url=amqp_url, broker_quorum=False
    )
    gw = Gateway(settings, redis_url)
    try:
        sid = gw.session()
        gw.due_now(sid)
        gw.rt.registry.refresh("w1", gw.rt.now_ms())
        gw.tick()
        assert queue_type(f"{redis_ns}.worker.w1") == "classic"
    finally:
        gw.close()
