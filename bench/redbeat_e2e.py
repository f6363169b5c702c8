"""celery-redbeat end to end, as a user would build it: the Celery app that ``celery -A`` loads.

One ``RedBeatSchedulerEntry`` per session (an interval schedule) calls ``fire``, a trivial task
that records when it was due and when it started: the echo agent's equivalent. Beat runs as
``celery -A bench.redbeat_e2e beat -S bench.redbeat_e2e:TimedRedBeatScheduler`` and two
``celery worker`` processes (threads pool) consume the queue.

``TimedRedBeatScheduler`` is redbeat's scheduler unchanged except for one measurement: as it
reserves an entry (redbeat sets ``last_run_at = now`` there) it notes the time the entry was due
(the previous ``last_run_at`` + interval), and a ``before_task_publish`` hook puts it in the
message header ``bench_due``. Self-contained (another branch has bench/redbeat_setup.py for the
beat-only comparisons); the URL comes from ``BENCH_REDBEAT_URL``.
"""

from __future__ import annotations

import json
import os
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import redis
from celery import Celery, Task
from celery.schedules import schedule as interval_schedule
from celery.signals import beat_init, before_task_publish, worker_ready
from redbeat import RedBeatScheduler, RedBeatSchedulerEntry
from redbeat.schedulers import get_redis

from bench.redbeat_setup import save_commands

URL_ENV = "BENCH_REDBEAT_URL"
PREFIX = "rb"
FIRES = f"{PREFIX}:bench:fires"  # a list of JSON [name, due_s, started_s]
READY = f"{PREFIX}:bench:ready"  # a set: "beat" and each worker's host name
QUEUE = f"{PREFIX}.fires"
TASK = "bench.redbeat_e2e.fire"


def make_app(url: str) -> Celery:
    app = Celery("bench_redbeat", broker=url)
    app.conf.update(
        # The same choices as the project's app (hbgw/celery_app.py), so only the scheduler and
        # the turn differ.
        task_serializer="json",
        accept_content=["json"],
        task_ignore_result=True,
        result_backend=None,
        task_acks_late=True,
        worker_prefetch_multiplier=1,
        task_default_queue=QUEUE,
        broker_connection_retry_on_startup=True,
        broker_transport_options={"global_keyprefix": f"{PREFIX}:celery:"},
        redbeat_redis_url=url,
        redbeat_redis_options={},
        redbeat_key_prefix=f"{PREFIX}:redbeat",
        timezone="UTC",
        worker_hijack_root_logger=False,
    )
    return app


app = make_app(os.environ.get(URL_ENV, "redis://127.0.0.1:6379/1"))
_record_client: redis.Redis | None = None
_due_of_next_publish: float | None = None


def _client() -> redis.Redis:
    global _record_client
    if _record_client is None:
        _record_client = redis.Redis.from_url(app.conf.broker_url)
    return _record_client


@app.task(name=TASK, bind=True)  # type: ignore[untyped-decorator]
def fire(self: Task, name: str) -> None:
    started = time.time()
    due = self.request.get("bench_due")
    _client().rpush(FIRES, json.dumps([name, due, started]))


class TimedRedBeatScheduler(RedBeatScheduler):  # type: ignore[misc]
    def reserve(self, entry: Any) -> Any:
        global _due_of_next_publish
        last = entry.last_run_at
        every = entry.schedule.run_every
        _due_of_next_publish = (last + every).timestamp() if last is not None else time.time()
        return super().reserve(entry)


@before_task_publish.connect  # type: ignore[untyped-decorator]
def _stamp_due(headers: dict[str, Any] | None = None, **_: Any) -> None:
    if headers is not None and _due_of_next_publish is not None:
        headers["bench_due"] = _due_of_next_publish


@worker_ready.connect  # type: ignore[untyped-decorator]
def _worker_ready(sender: Any = None, **_: Any) -> None:
    _client().sadd(READY, str(getattr(sender, "hostname", "worker")))


@beat_init.connect  # type: ignore[untyped-decorator]
def _beat_ready(**_: Any) -> None:
    _client().sadd(READY, "beat")


def populate(target: Celery, prefix: str, sessions: int, interval_s: int, first_due: float) -> None:
    """``sessions`` entries named ``prefix<n>`` whose first due times spread evenly over one
    interval from ``first_due`` (epoch seconds): a steady offered rate of sessions / interval."""
    every = timedelta(seconds=interval_s)
    client = get_redis(target)
    with client.pipeline(transaction=False) as pipe:
        for i in range(sessions):
            due = first_due + i * interval_s / sessions
            entry = RedBeatSchedulerEntry(
                name=f"{prefix}{i:06d}",
                task=TASK,
                schedule=interval_schedule(every),
                args=[f"{prefix}{i:06d}"],
                app=target,
            )
            entry.last_run_at = datetime.fromtimestamp(due, UTC) - every
            save_commands(pipe, entry)  # what entry.save() writes, on one pipeline
        pipe.execute()


def remove(target: Celery, prefix: str) -> None:
    """Delete the entries named ``prefix…`` (what ``RedBeatSchedulerEntry.delete()`` does)."""
    client = get_redis(target)
    conf = target.redbeat_conf
    keys = list(client.scan_iter(match=f"{conf.key_prefix}{prefix}*", count=1000))
    with client.pipeline(transaction=False) as pipe:
        for key in keys:
            pipe.zrem(conf.schedule_key, key)
            pipe.delete(key)
        pipe.execute()


def read_fires(client: redis.Redis, prefix: str) -> list[tuple[float, float]]:
    """(due, started) of every recorded fire of the entries named ``prefix…``, epoch seconds."""
    out = []
    for raw in client.lrange(FIRES, 0, -1):
        name, due, started = json.loads(raw)
        if due is not None and name.startswith(prefix):
            out.append((float(due), float(started)))
    return out
