"""The Celery application shared by beat and the workers (wiring: it names their modules)."""

from __future__ import annotations

from typing import Any

from celery import Celery
from celery.signals import setup_logging

from hbgw.broker import broker_conf, broker_url
from hbgw.core.settings import Settings
from hbgw.state.dispatch import AppContext, attach_context


@setup_logging.connect  # type: ignore[untyped-decorator]
def _logging_is_configured_by_hbgw(**_: Any) -> None:
    """With a receiver here Celery adds no handler or format of its own (its task logger would
    otherwise write in another format and stop propagating); core.logs.configure_logging does it.
    """


def make_celery(settings: Settings, state_url: str) -> Celery:
    """The app of every role; its broker is HBGW_BROKER_URL, else the state Redis at
    ``state_url`` (``hbgw/broker.py``)."""
    given = settings.broker_url or state_url
    app = Celery("hbgw", broker=broker_url(settings, state_url), include=["hbgw.workers.tasks"])
    app.conf.update(
        task_serializer="json",
        accept_content=["json"],
        result_serializer="json",
        # Results are never read: fire-and-forget keeps Redis small (and avoids redis-py 8's
        # deprecated setex in the result backend).
        task_ignore_result=True,
        result_backend=None,
        task_acks_late=True,
        task_reject_on_worker_lost=True,
        worker_prefetch_multiplier=1,
        # Flower's task list is made of these; each is a PUBLISH in the consumer's one thread,
        # so a fleet behind a slow network may turn them off (HBGW_TASK_EVENTS).
        worker_send_task_events=settings.task_events,
        task_send_sent_event=settings.task_events,
        task_default_queue=f"{settings.namespace}.default",
        broker_connection_retry_on_startup=True,
        # Issue 7: a Redis error (a full Redis included) is waited out, never a reason to exit.
        # None retries for ever; hbgw.consumer spaces the attempts and logs one line each.
        broker_connection_max_retries=None,
        broker_channel_error_retry=True,
        worker_consumer="hbgw.consumer:ResilientConsumer",
        worker_hijack_root_logger=False,
        # The console channel prints deliveries; they are not warnings.
        worker_redirect_stdouts_level="INFO",
        beat_scheduler="hbgw.beat.scheduler:HeartbeatScheduler",
        beat_max_loop_interval=settings.beat_max_sleep,
        timezone="UTC",
        **broker_conf(settings, given),
    )
    attach_context(app, AppContext(settings))
    return app
