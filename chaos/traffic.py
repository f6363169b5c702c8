"""The users: sessions with heartbeats, then user messages at a steady rate through the edge's
real accept path (``gateway.inbound.receive`` with a Runtime and a Dispatcher).

Messages are sent from a thread of their own: a send that blocks while Redis is down must not
delay the fault schedule. A send that raises was not accepted as far as the client knows; SQL
may still hold the message, and the checks hold the system to it whatever the edge said.
"""

from __future__ import annotations

import random
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import timedelta

from chaos.profiles import JOBS, POLICY_HEARTBEATS, SESSION_JOBS, WEBHOOK_EVERY, Profile
from hbgw.celery_app import make_celery
from hbgw.core.clock import utcnow
from hbgw.core.settings import Settings
from hbgw.gateway.inbound import InboundParts, Queued, receive
from hbgw.sessions.grammar import limits_from_settings
from hbgw.sessions.grammar.job_schedule import parse_job_schedule
from hbgw.sessions.store import Store
from hbgw.sessions.views import JobRoute, NewJob
from hbgw.state.connection import connect
from hbgw.state.dispatch import Dispatcher
from hbgw.state.runtime import Runtime


@dataclass
class Traffic:
    settings: Settings
    redis_url: str
    profile: Profile
    seed: int
    webhook_url: str | None = None  # the receiver of the sessions on platform webhook
    sessions: list[str] = field(default_factory=list)
    accepted: list[int] = field(default_factory=list)
    errors: Counter[str] = field(default_factory=Counter)
    sent: int = 0
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def __post_init__(self) -> None:
        self.rt = Runtime(
            settings=self.settings,
            store=Store.from_url(self.settings.effective_database_url),
            client=connect(self.redis_url, self.settings),  # the policy it accepts, too
            worker="chaos-edge",
        )
        self.dispatcher = Dispatcher(make_celery(self.settings, self.redis_url), self.rt.keys)
        self.limits = limits_from_settings(self.settings)

    def setup(self) -> None:
        intervals = self.profile.intervals
        for i in range(self.profile.sessions):
            hooked = self.webhook_url is not None and i % WEBHOOK_EVERY == 0
            sid = self.rt.store.sessions.create_session(
                platform="webhook" if hooked else "chaos",
                chat=f"chat-{i:03d}",
                thread=None,
                now=utcnow(),
            ).id
            if hooked:
                self.rt.store.webhooks.set_webhook_url(sid, self.webhook_url, utcnow())
            self.sessions.append(sid)
            every = intervals[i % len(intervals)]
            self._receive(sid, f"/heartbeat every {every}s status of job {i}")
        self._policy_heartbeats()
        self._jobs()

    def _policy_heartbeats(self) -> None:
        """Heartbeats with policies, each in a session of its own that users also write to:
        active hours that hold the whole run and hours that it never reaches, jittered and
        exact ones (``{inside}``/``{outside}``: windows of whole hours around now, in UTC)."""
        now = utcnow()
        inside = f"{now - timedelta(hours=1):%H}:00-{now + timedelta(hours=2):%H}:00 UTC"
        outside = f"{now + timedelta(hours=3):%H}:00-{now + timedelta(hours=4):%H}:00 UTC"
        for n, policy in enumerate(POLICY_HEARTBEATS):
            sid = self.rt.store.sessions.create_session(
                platform="chaos", chat=f"policy-{n:02d}", thread=None, now=utcnow()
            ).id
            self.sessions.append(sid)
            words = policy.format(inside=inside, outside=outside)
            self._receive(sid, f"/heartbeat {words} policy check {n}")

    def _jobs(self) -> None:
        """Cron jobs: ``JOBS`` added by /cron in a session's chat (each run a fresh session
        delivered there), ``SESSION_JOBS`` into existing sessions that have a heartbeat."""
        chat = self.sessions[1]
        for n, schedule in enumerate(JOBS):
            self._receive(chat, f"/cron add {schedule} -- cron job {n}")
        for n, schedule in enumerate(SESSION_JOBS):
            sid, now = self.sessions[2 + n], utcnow()
            parsed = parse_job_schedule(schedule, now=now, min_interval=self.limits.min_interval)
            route = JobRoute(session_id=sid)
            job = self.rt.store.jobs.create_job(
                NewJob(parsed, schedule, f"job in {sid}", route), now
            )
            self.rt.due.settle_job(job.id)

    def _receive(self, sid: str, text: str) -> Queued | None:
        result = receive(
            self.rt.store,
            sid,
            text,
            utcnow(),
            self.limits,
            parts=InboundParts.of(self.rt),
            dispatcher=self.dispatcher,
        )
        return result if isinstance(result, Queued) else None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._send_loop, name="chaos-traffic", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(30)

    def _send_loop(self) -> None:
        rng = random.Random(self.seed)
        period = 1.0 / self.profile.message_rate
        next_at = time.monotonic()
        while not self._stop.is_set():
            sid = rng.choice(self.sessions)
            self.sent += 1
            try:
                queued = self._receive(sid, f"question {self.sent}")
                if queued is not None:
                    self.accepted.append(queued.message_id)
            except Exception as exc:
                self.errors[type(exc).__name__] += 1
            next_at += period
            self._stop.wait(max(0.0, next_at - time.monotonic()))

    def close(self) -> None:
        self.rt.close()
