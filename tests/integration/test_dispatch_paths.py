"""Publishing to the owning worker (hbgw/state/dispatch.py), at its edges: an app that cannot
run turns says how to start one, a batch opened inside a batch joins it, and on RabbitMQ beat
cannot tell cheaply what waits in a queue, so it holds nothing. Real Celery apps, on the Redis
and the RabbitMQ these machines run."""

from __future__ import annotations

from pathlib import Path

import amqp
import pytest
from celery import Celery
from support.broker import take_fires
from support.harness import Gateway, gateway_settings, wait_until
from support.rabbitmq import HOST, PORT

from hbgw.beat.core import BeatCore
from hbgw.core.errors import NotWired
from hbgw.state.dispatch import FIRE_TASK, context_of


def test_a_fire_reaching_an_app_without_a_turn_runner_says_to_start_hbgw_worker(
    gateway: Gateway,
) -> None:
    """Beat's app (and the API's) publishes fires but has no turn runner: a fire task run
    there fails with what to do instead of an AttributeError."""
    gateway.app.loader.import_default_modules()  # the task modules, as a worker loads them
    result = gateway.app.tasks[FIRE_TASK].apply(args=[[["s1", 1]]])
    assert isinstance(result.result, NotWired)
    assert "start workers with `hbgw worker`" in str(result.result)


def test_a_celery_app_not_built_by_the_gateway_is_refused_with_what_to_run() -> None:
    with pytest.raises(NotWired, match=r"not built by heartbeat-gateway.*`hbgw beat`"):
        context_of(Celery("stranger"))


def test_a_batch_opened_inside_a_batch_joins_it(gateway: Gateway) -> None:
    """Everything goes out when the outermost batch ends, in its one round trip: the inner
    one neither opens a second producer nor flushes early."""
    gw = gateway
    queue = gw.rt.keys.worker_queue("w1")
    with gw.dispatcher.batch():
        with gw.dispatcher.batch():
            gw.dispatcher.fires("w1", [("s1", 1)])
        gw.dispatcher.fires("w1", [("s2", 2)])
        assert gw.dispatcher.waiting(["w1"]) == {"w1": 0}  # nothing sent yet
    assert gw.dispatcher.waiting(["w1"]) == {}  # outside a batch: nothing to ask with
    assert take_fires(gw.app, queue) == [("s1", 1), ("s2", 2)]


def message_count(queue: str) -> int:
    conn = amqp.Connection(f"{HOST}:{PORT}", userid="guest", password="guest")
    conn.connect()
    try:
        _name, count, _consumers = conn.channel().queue_declare(queue, passive=True)
        return int(count)
    finally:
        conn.close()


def test_on_rabbitmq_beat_holds_no_fires_for_a_queue_it_cannot_measure(
    tmp_path: Path, redis_url: str, redis_ns: str, amqp_url: str
) -> None:
    """HBGW_BEAT_HOLD waits for a worker's queue to be taken from; RabbitMQ cannot say how
    many messages wait in one round trip, so each tick's fires go out at once."""
    settings = gateway_settings(
        tmp_path, redis_url, redis_ns, agent="echo", broker_url=amqp_url, beat_hold=2.0
    )
    gw = Gateway(settings, redis_url)
    try:
        gw.rt.registry.refresh("w1", gw.rt.now_ms())  # live, not consuming
        beat = BeatCore(gw.rt, gw.dispatcher)
        for _ in range(2):
            gw.due_now(gw.session())
            beat.tick()
            assert len(beat.held) == 0
        # A publish is asynchronous in AMQP: the queue shows it once the broker took it.
        queue = f"{redis_ns}.worker.w1"
        wait_until(lambda: message_count(queue) == 2, what="two messages in w1's queue")
    finally:
        gw.close()
