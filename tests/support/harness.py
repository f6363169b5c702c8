"""A whole gateway on real components for tests: real Redis, real Celery workers, real SQL.

Workers run in-process (celery.contrib.testing.worker.start_worker, threads pool) or as real
`hbgw worker` processes; beat ticks are driven by the test (or a real `hbgw beat` process).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from celery.contrib.testing.worker import start_worker

from hbgw.beat.core import BeatCore
from hbgw.celery_app import make_celery
from hbgw.core.clock import utcnow
from hbgw.core.settings import Settings
from hbgw.gateway.channels.file import read_records
from hbgw.procs import settings_env
from hbgw.sessions.grammar import IntervalSchedule
from hbgw.sessions.states import SETTLED
from hbgw.sessions.store import Store
from hbgw.state.connection import connect
from hbgw.state.dispatch import Dispatcher
from hbgw.state.runtime import Runtime
from hbgw.wiring import assembled_worker
from hbgw.workers.runner import TurnRunner

AGENT_SCRIPT = Path(__file__).with_name("agent_script.py")

FAST = {
    "min_interval": 1,
    "lock_lease": 2,
    "worker_ttl": 3,
    "claim_lease": 4,
    "refund_backoff": 1,
    "restore_interval": 1,
    "beat_max_sleep": 0.2,
    # Tests tick beat and read its messages off a queue no consumer takes from: a hold would
    # keep every tick after the first. Holding has its own tests
    # (tests/integration/test_beat_hold.py), and the chaos runs keep the default.
    "beat_hold": 0,
    # Tests that backdate a heartbeat by one interval expect it due; jitter has its own tests.
    "jitter": False,
    # Their agents answer each fire alike; dedupe has its own tests
    # (tests/integration/test_policy_dedupe.py).
    "dedupe": "0",
    # Tests date their rows with fixed clocks; a beat on the real one must never age them out.
    # Retention has its own tests (tests/integration/test_retention.py).
    "retain_runs_days": 0,
}


def gateway_settings(
    tmp_path: Path, redis_url: str, namespace: str, **overrides: object
) -> Settings:
    values: dict[str, object] = {
        "home": tmp_path,
        "redis_url": redis_url,
        "namespace": namespace,
        "channel": "file",
        "channel_file": tmp_path / "deliveries.jsonl",
        "agent_log": tmp_path / "agent.jsonl",
        "agent": "command",
        "agent_command": f"{sys.executable} {AGENT_SCRIPT}",
        # The test agent runs this checkout's interpreter and waits on files in the test's own
        # directory, both private to the user running the tests; the isolation of the command
        # agent has its own tests (tests/e2e/test_agent_isolation.py).
        "agent_same_user": True,
        **FAST,
    }
    values.update(overrides)
    return Settings(**values)  # type: ignore[arg-type]


def wait_until(predicate: Callable[[], Any], timeout: float = 20.0, what: str = "") -> Any:
    """Poll for an outcome of real concurrent work (never a timed assertion)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what or predicate}")


class Gateway:
    def __init__(self, settings: Settings, redis_url: str) -> None:
        self.settings = settings
        self.redis_url = redis_url
        self.store = Store.from_url(settings.effective_database_url)
        self.rt = Runtime(settings=settings, store=self.store, client=connect(redis_url, settings))
        self.app = make_celery(settings, redis_url)
        self.dispatcher = Dispatcher(self.app, self.rt.keys)
        self.beat = BeatCore(self.rt, self.dispatcher)
        self.runners: dict[str, TurnRunner] = {}

    # -- environment for real processes -----------------------------------------------------

    def env(self) -> dict[str, str]:
        return settings_env(self.settings, redis_url=self.redis_url)

    # -- in-process workers -----------------------------------------------------------------

    @contextmanager
    def worker(
        self,
        name: str,
        *,
        settings: Settings | None = None,
        threads: int = 4,
        heartbeat_events: bool = False,
    ) -> Iterator[TurnRunner]:
        """``heartbeat_events``: the worker publishes Celery's worker heartbeats, as `hbgw
        worker` does (the testing worker leaves them out by default)."""
        with assembled_worker(settings or self.settings, name, threads=threads) as parts:
            self.runners[name] = parts.runner
            try:
                with start_worker(
                    parts.app,
                    pool="threads",
                    concurrency=2,
                    perform_ping_check=False,
                    queues=[parts.queue],
                    hostname=f"{name}@test",
                    shutdown_timeout=30,
                    without_heartbeat=not heartbeat_events,
                ):
                    yield parts.runner
            finally:
                del self.runners[name]

    # -- driving ----------------------------------------------------------------------------

    def session(self, *, chat: str = "C1", thread: str | None = "T1") -> str:
        return self.store.sessions.create_session(
            platform="slack", chat=chat, thread=thread, now=utcnow()
        ).id

    def heartbeat(
        self,
        sid: str,
        *,
        seconds: int = 60,
        prompt: str = "check CI",
        set_at: datetime | None = None,
    ) -> None:
        """Set a heartbeat as if at ``set_at`` (backdating instead of sleeping)."""
        self.store.heartbeats.set_heartbeat(
            sid,
            schedule=IntervalSchedule(seconds),
            schedule_text=f"every {seconds}s",
            prompt=prompt,
            now=set_at or utcnow(),
        )
        self.rt.due.settle(sid)

    def due_now(
        self, sid: str, *, seconds: int = 60, missed: int = 0, prompt: str = "check CI"
    ) -> None:
        self.heartbeat(
            sid,
            seconds=seconds,
            prompt=prompt,
            set_at=utcnow() - timedelta(seconds=seconds * (missed + 1) + 1),
        )

    def tick(self) -> float:
        return self.beat.tick()

    def runs(self, sid: str | None = None) -> list[Any]:
        return self.store.ledger.runs(sid)

    def final_runs(self, sid: str, count: int = 1, timeout: float = 20.0) -> list[Any]:
        def done() -> list[Any] | None:
            runs = [r for r in self.store.ledger.runs(sid) if r.state in SETTLED]
            return runs if len(runs) >= count else None

        return wait_until(done, timeout, f"{count} finished runs of {sid}")  # type: ignore[no-any-return]

    def deliveries(self, sid: str | None = None, call: str | None = None) -> list[dict[str, Any]]:
        path = self.settings.channel_file
        assert path is not None
        return [
            r
            for r in read_records(Path(path))
            if (sid is None or r["session_id"] == sid) and (call is None or r["call"] == call)
        ]

    def close(self) -> None:
        self.rt.close()
