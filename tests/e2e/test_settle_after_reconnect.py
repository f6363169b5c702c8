"""Issue 15: a task that was running when Redis restarted settles its message, and the worker
stays up.

The chaos runs found workers that exited with "Unrecoverable error: AttributeError('NoneType'
object has no attribute 'hostname')": a task in flight across a broker reconnect acked its
message after the new consumer started, on the channel of the lost connection, and kombu raised
from the event loop. A real worker with our consumer, on a Redis of the test's own, holds a task
across a restart; once released, the worker must keep consuming.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import redis
from support.harness import gateway_settings, wait_until
from support.holding_worker import NAMESPACE, QUEUE
from support.private_redis import running_redis

from hbgw.celery_app import make_celery
from hbgw.procs import spawn_module, stop_all

pytestmark = pytest.mark.timeout(180)

TESTS = Path(__file__).parents[1]  # tests/, for support


def _consuming(admin: redis.Redis) -> bool:
    return any(c.get("cmd") == "brpop" for c in admin.client_list())


def test_a_task_in_flight_across_a_redis_restart_settles_and_the_worker_stays_up(
    tmp_path: Path,
) -> None:
    marks = tmp_path / "marks"
    marks.mkdir()
    log = tmp_path / "worker.log"
    with running_redis(tmp_path / "redis") as server:
        app = make_celery(gateway_settings(tmp_path, server.url, NAMESPACE), server.url)
        admin = server.client()
        env = {**os.environ, "PYTHONPATH": str(TESTS), "HBGW_LOG_FORMAT": "json"}
        proc = spawn_module("support.holding_worker", [server.url, str(marks)], env=env, log=log)
        try:

            def started(name: str) -> bool:
                assert proc.poll() is None, f"the worker exited:\n{log.read_text()[-3000:]}"
                return (marks / f"started-{name}").exists()

            wait_until(lambda: _consuming(admin), 60, "the worker's consumer")
            app.send_task("test.hold", args=["first"], queue=QUEUE)
            wait_until(lambda: started("first"), 60, "the first task to start")

            server.stop()
            server.start()
            admin = server.client()
            wait_until(lambda: _consuming(admin), 60, "the consumer to reconnect")
            (marks / "release").touch()
            wait_until(lambda: (marks / "done-first").exists(), 30, "the first task to end")
            # Redis came back empty: a new task is all the worker can show it still consumes.
            app.send_task("test.hold", args=["second"], queue=QUEUE)
            wait_until(lambda: started("second"), 60, "the second task to start")
            wait_until(lambda: (marks / "done-second").exists(), 30, "the second task to end")
            assert proc.poll() is None
            assert "worker.stale_ack" in log.read_text()
        finally:
            stop_all([proc], timeout=20)
            admin.close()
    assert "Unrecoverable" not in log.read_text()
