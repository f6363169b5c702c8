"""The RabbitMQ these machines run (127.0.0.1:5672, guest/guest): a broker URL for a test, and
the queues and exchanges its namespace declared, deleted afterwards. Tests skip on a laptop
without RabbitMQ, never when ``CI`` is set (there it is part of the machine)."""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator
from contextlib import suppress

import amqp
import pytest

HOST, PORT = "127.0.0.1", 5672
URL = os.environ.get("HBGW_TEST_AMQP_URL", f"amqp://guest:guest@{HOST}:{PORT}//")


def rabbitmq_available() -> bool:
    try:
        with socket.create_connection((HOST, PORT), timeout=1):
            return True
    except OSError:
        return False


def require_rabbitmq() -> None:
    if rabbitmq_available():
        return
    if os.environ.get("CI"):
        pytest.fail(f"RabbitMQ is required in CI but {HOST}:{PORT} does not answer.")
    pytest.skip(f"RabbitMQ not reachable at {HOST}:{PORT}")


def delete_namespace(namespace: str, queues: list[str], exchanges: list[str]) -> None:
    """Remove what a test's namespace declared (queues are durable: they would stay)."""
    conn = amqp.Connection(f"{HOST}:{PORT}", userid="guest", password="guest")
    conn.connect()
    try:
        for name in queues:
            channel = conn.channel()
            with suppress(amqp.exceptions.AMQPError):
                channel.queue_delete(name)
        for name in exchanges:
            channel = conn.channel()
            with suppress(amqp.exceptions.AMQPError):
                channel.exchange_delete(name)
    finally:
        conn.close()


def queue_type(name: str) -> str | None:
    """ "quorum" or "classic", or None when the queue does not exist. RabbitMQ answers a
    declare whose type differs from the queue's with PRECONDITION_FAILED: a classic declare
    that fails names a quorum queue."""
    conn = amqp.Connection(f"{HOST}:{PORT}", userid="guest", password="guest")
    conn.connect()
    try:
        try:
            conn.channel().queue_declare(name, passive=True)
        except amqp.exceptions.NotFound:
            return None
        try:
            conn.channel().queue_declare(name, durable=True, auto_delete=False)
        except amqp.exceptions.PreconditionFailed:
            return "quorum"
        return "classic"
    finally:
        with suppress(Exception):
            conn.close()


@pytest.fixture
def amqp_url(redis_ns: str) -> Iterator[str]:
    require_rabbitmq()
    yield URL
    queues = [f"{redis_ns}.default", *(f"{redis_ns}.worker.w{n}" for n in range(1, 4))]
    exchanges = [*queues, f"{redis_ns}.control.pidbox", f"{redis_ns}.events"]
    delete_namespace(redis_ns, queues, exchanges)
