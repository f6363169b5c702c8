"""`hbgw demo`: a finite, self-driving run of the whole contract on the embedded defaults.

Real processes (embedded Redis, beat, two workers) on a fresh SQLite store; the demo itself
plays the chat users: it sets heartbeats, sends messages, compresses one session, resets
another, holds one under an emergency stop (its fires are refunded), and SIGKILLs a worker
midway. It ends with a summary and the invariant check, computed from the ledger.
"""

from __future__ import annotations

import random
import signal
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.live import Live
from rich.table import Table

from hbgw.celery_app import make_celery
from hbgw.core.clock import utcnow
from hbgw.core.settings import Settings
from hbgw.gateway.channels.file import read_records
from hbgw.gateway.inbound import InboundParts, receive
from hbgw.invariants import check
from hbgw.sessions.grammar import limits_from_settings
from hbgw.sessions.replies import preview
from hbgw.sessions.states import GIVEN_BACK, REACHED_AGENT, RunState, SessionStatus
from hbgw.state.dispatch import Dispatcher
from hbgw.state.runtime import Runtime
from hbgw.up import Stack, local_stack

DEMO_SETTINGS: dict[str, Any] = {
    "min_interval": 1,
    "lock_lease": 3,
    "worker_ttl": 3,
    "claim_lease": 5,
    "refund_backoff": 2,
    "restore_interval": 5,
    "beat_max_sleep": 0.2,
    "agent": "echo",
    "echo_delay": 0.4,
    "channel": "file",
}
SESSIONS = 30


ESTOP_PATIENCE = 15.0


@dataclass
class Script:
    """The demo's timeline: (fraction of the run, label, action)."""

    events: list[tuple[float, str, Callable[[], bool | None]]] = field(default_factory=list)
    done: set[int] = field(default_factory=set)
    log: list[str] = field(default_factory=list)

    def due(self, fraction: float) -> None:
        for i, (at, label, action) in enumerate(self.events):
            if i not in self.done and fraction >= at:
                if action() is False:
                    continue  # not ready yet: tried again on the next tick
                self.done.add(i)
                self.log.append(label)


class Demo:
    def __init__(self, settings: Settings, stack: Stack, seed: int) -> None:
        self.settings = settings
        self.stack = stack
        self.rng = random.Random(seed)
        self.rt = Runtime.from_settings(settings)
        self.dispatcher = Dispatcher(make_celery(settings, stack.redis_url), self.rt.keys)
        self.limits = limits_from_settings(settings)
        self.sessions: list[str] = []
        self.notes: dict[str, str] = {}
        self.estop_since = 0.0

    def send(self, sid: str, text: str) -> str:
        result = receive(
            self.rt.store,
            sid,
            text,
            utcnow(),
            self.limits,
            parts=InboundParts.of(self.rt),
            dispatcher=self.dispatcher,
        )
        return getattr(result, "text", "")

    def setup(self) -> None:
        for i in range(SESSIONS):
            sid = self.rt.store.sessions.create_session(
                platform="demo", chat=f"chat-{i:02d}", thread=None, now=utcnow()
            ).id
            self.sessions.append(sid)
            every = 3 + i % 4
            quiet = " #quiet" if i % 3 == 0 else ""
            self.send(sid, f"/heartbeat every {every}s check build #{i}{quiet}")

    def chatter(self) -> None:
        """A burst of user messages on a few sessions: heartbeats there must wait.

        The first five sessions are left to the scripted events (compression, reset, the
        emergency stop, whose refunds queued user messages would otherwise hold back).
        """
        for sid in self.rng.sample(self.sessions[5:], 3):
            if self.rt.store.sessions.get_session(sid).status == SessionStatus.ACTIVE:
                for n in range(self.rng.randint(1, 3)):
                    self.send(sid, f"question {n}")

    def long_conversation(self) -> None:
        """About eight seconds of queued user turns: session 3's heartbeat must wait for idle."""
        sid = self.sessions[3]
        for n in range(20):
            self.send(sid, f"long question {n}")
        self.notes[sid] = "busy: 20 queued messages"

    def compress(self) -> None:
        sid = self.sessions[1]
        child = self.rt.store.sessions.compress(sid, utcnow())
        self.rt.due.settle(sid)
        self.rt.due.settle(child.id)
        self.sessions[1] = child.id
        self.notes[child.id] = "compressed child"

    def reset(self) -> None:
        sid = self.sessions[2]
        self.rt.store.sessions.reset(sid, utcnow())
        self.rt.due.settle(sid)
        self.notes[sid] = "reset"

    def estop(self, on: bool) -> None:
        sid = self.sessions[4]
        self.rt.gate.set_estop(on, sid)
        self.estop_since = time.monotonic()
        self.notes[sid] = "emergency stop" if on else "estop lifted"

    def lift_estop(self) -> bool:
        """Lift it once a fire was refunded under it (a busy machine may take a while to try
        one), or after ESTOP_PATIENCE seconds whatever happened."""
        sid = self.sessions[4]
        refunded = any(r.state in GIVEN_BACK for r in self.rt.store.ledger.runs(sid))
        if not refunded and time.monotonic() - self.estop_since < ESTOP_PATIENCE:
            return False
        self.estop(False)
        return True

    def kill_worker(self) -> None:
        proc = self.stack.procs["w2"]
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
        del self.stack.procs["w2"]
        self.notes["w2"] = "killed"

    def table(self, elapsed: float, total: float, events: list[str]) -> Table:
        now = utcnow()
        table = Table(
            title=f"hbgw demo — {elapsed:4.0f}s / {total:.0f}s — {', '.join(events[-3:])}"
        )
        for column in ("session", "schedule", "next due", "fires", "pending", "last outcome", ""):
            table.add_column(column)
        for sid in self.sessions[:14]:
            status = self.rt.store.heartbeats.heartbeat_status(sid, now)
            data = status.to_json()
            if status.due_now and not self.rt.gate.is_idle(sid):
                due = "due — waiting for idle"
            elif status.due_now:
                due = "due now"
            elif status.next_due is not None:
                due = f"in {max(0.0, (status.next_due - now).total_seconds()):.1f}s"
            else:
                due = "—"
            table.add_row(
                sid,
                data["schedule"] or "none",
                due,
                str(data["fire_count"]),
                "yes" if self.rt.gate.pending(sid) else "",
                data["last_outcome"] or "",
                self.notes.get(sid, preview(data["prompt"] or "")[:24]),
            )
        return table

    def summary(self) -> dict[str, Any]:
        runs = self.rt.store.ledger.runs()
        reached = [r for r in runs if r.state in REACHED_AGENT]
        failed = [r for r in runs if r.state == RunState.FAILED]
        path = self.settings.channel_file
        sends = [r for r in read_records(Path(path)) if r["call"] == "send"] if path else []
        rt = self.rt
        interval = rt.settings.restore_interval
        report = check(rt.store.ledger, rt.gate, rt.index, utcnow(), restore_interval=interval)
        return {
            "sessions": len(self.sessions),
            "fires": len(reached),
            "deferred_until_idle": sum(1 for r in reached if r.deferred),
            "coalesced": sum(r.missed for r in reached),
            "refunds": sum(1 for r in runs if r.state in GIVEN_BACK),
            "silent": sum(1 for r in runs if r.state == RunState.SILENT),
            "failed": len(failed),
            # Why each failed run failed (its detail): the summary explains them.
            "failed_details": dict(Counter(r.detail or "no detail" for r in failed)),
            "delivered": len(sends),
            "heartbeat_deliveries": sum(1 for r in sends if r["kind"] == "heartbeat"),
            "user_replies": sum(1 for r in sends if r["kind"] in ("reply", "notice")),
            **report.to_json(),
        }


def run_demo(duration: float, *, console: Console, live: bool, seed: int = 7) -> dict[str, Any]:
    """The demo in a temporary home, removed afterwards (its servers are stopped by then)."""
    with tempfile.TemporaryDirectory(prefix="hbgw-demo-") as home:
        return _run_demo(Path(home), duration, console=console, live=live, seed=seed)


def _run_demo(
    home: Path, duration: float, *, console: Console, live: bool, seed: int
) -> dict[str, Any]:
    settings = Settings(home=home, channel_file=home / "deliveries.jsonl", **DEMO_SETTINGS)
    console.print(f"[bold]hbgw demo[/] — {duration:.0f}s in {home} (embedded Redis, SQLite)")
    with local_stack(settings, workers=2) as stack:
        demo = Demo(settings, stack, seed)
        _wait_for_workers(demo, 2, timeout=60)
        demo.setup()
        script = Script(
            [
                (0.1, "a long conversation", demo.long_conversation),
                (0.2, "emergency stop on one session", lambda: demo.estop(True)),
                (0.3, "compressed a session", demo.compress),
                (0.35, "reset a session", demo.reset),
                (0.45, "emergency stop lifted", demo.lift_estop),
                (0.5, "SIGKILLed worker w2", demo.kill_worker),
            ]
        )
        started = time.monotonic()
        with Live(console=console, refresh_per_second=2, transient=False) as view:
            while (elapsed := time.monotonic() - started) < duration:
                script.due(elapsed / duration)
                if int(elapsed * 2) % 3 == 0:
                    demo.chatter()
                if live:
                    view.update(demo.table(elapsed, duration, script.log))
                time.sleep(0.5)
            if live:
                view.update(demo.table(duration, duration, script.log))
        stack.stop()  # workers finish their turns; Redis stays up for the index check
        summary = demo.summary()
        demo.rt.close()
    return summary


def _wait_for_workers(demo: Demo, count: int, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while len(demo.rt.registry.live(demo.rt.now_ms())) < count:
        if time.monotonic() > deadline:
            raise SystemExit("The demo's workers did not start; see the logs in HBGW_HOME/logs.")
        time.sleep(0.2)
