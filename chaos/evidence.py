"""What the checks read: plain records of the ledger, the messages, the channel and the faults.

Times are epoch seconds (floats) from the one machine clock every process shares, so a time in
SQL, a line of the channel file and a fault's start compare directly.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import UTC, datetime

from hbgw.sessions.grammar.hours import ActiveHours
from hbgw.sessions.states import IN_TURN
from hbgw.sessions.states import REACHED_AGENT as _REACHED

# Run states of a fire that reached the agent (counted once, whatever happened after), and of
# one whose turn is still going or was cut off: ``delivering`` is both.
REACHED_AGENT = {str(s) for s in _REACHED}
IN_TURN_STATES = {str(s) for s in IN_TURN}


@dataclass(frozen=True)
class Run:
    fire_id: str
    session: str
    fence: int
    state: str
    reserved: float
    started: float | None = None
    finished: float | None = None
    worker: str | None = None
    detail: str | None = None
    job: str | None = None  # the cron job of the run (None: a heartbeat's fire)


@dataclass(frozen=True)
class UserMessage:
    id: int
    session: str
    state: str
    created: float


@dataclass(frozen=True)
class Reply:
    id: int
    session: str
    reply_to: int
    created: float


@dataclass(frozen=True)
class Delivery:
    """One line of the file channel: ``send`` (a message left) or ``typing`` (a turn began).

    ``delivery_key``, ``repeat`` and ``fence`` are read when the channel writes them (``None``,
    ``False``, ``None`` otherwise): the same key twice is one message sent again, which must then
    say so (``repeat``); ``fence`` is the grant the sender held.
    """

    call: str
    session: str
    at: float
    kind: str | None = None
    reply_to: str | None = None
    ref: str | None = None
    delivery_key: str | None = None
    repeat: bool = False
    fence: int | None = None


@dataclass(frozen=True)
class Heartbeat:
    session: str
    interval: float
    set_at: float
    active: bool = True
    hours: str | None = None  # active hours as ActiveHours.describe() (None: always)
    jittered: bool = False  # its due times carry the session's jitter offset


@dataclass(frozen=True)
class Job:
    """A cron job of the run: its target session (None: a fresh session per run) and period
    (the interval, or the gap between its cron times)."""

    id: str
    session: str | None
    period: float
    set_at: float
    active: bool = True
    fixed: bool = False  # a cron schedule: its times are fixed, not re-anchored by each run
    first_due: float | None = None
    """Its first due time after its add, jitter offset included (``sessions.jobs``); None:
    not jittered (``exact``, a one-shot) — the jitter check only reads it then."""
    offset: float = 0.0  # that offset, seconds


@dataclass(frozen=True)
class Disruption:
    """A fault as the checks see it: what, on whom, and when it began and ended."""

    kind: str
    target: str | None
    began: float
    ended: float


# A line that says why a process stopped: Celery's "Unrecoverable error", a traceback, a CRITICAL.
_CAUSE = re.compile(r"Traceback|CRITICAL|Unrecoverable|Error|Exception", re.IGNORECASE)


def exit_cause(tail: list[str]) -> str:
    """The last line of a log tail that names an error, else its last line."""
    for line in reversed(tail):
        if _CAUSE.search(line):
            return line.strip()[:300]
    return tail[-1].strip()[:300] if tail else "no log"


@dataclass(frozen=True)
class ProcessExit:
    role: str
    pid: int
    code: int | None
    at: float
    # The end of the role's log when it exited: the cause, even when the run directory is gone.
    last_lines: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Attempt:
    """One try of the attacking tenant's (``chaos/tenant.py``) and the API's answer (``status``
    0: no answer at all)."""

    name: str
    status: int
    answer: str
    refused: bool


@dataclass(frozen=True)
class TenantSession:
    """A session the store holds for the attacking tenant, as read at the snapshot."""

    id: str
    platform: str
    chat: str
    webhook_url: str | None = None


@dataclass(frozen=True)
class WebhookHit:
    """One request the chaos webhook receiver got (``chaos/webhook_receiver.py``)."""

    at: float
    key: str | None
    repeat: bool  # X-Hbgw-Possible-Repeat: 1
    signed: bool  # the signature verified
    status: int  # what it was answered (a hang's 200 arrived too late)
    taken: bool  # the first request of its key that the receiver kept
    hung: bool
    session: str | None = None
    kind: str | None = None
    ref: str | None = None
    reply_to: str | None = None
    delivery_key: str | None = None


@dataclass
class Evidence:
    runs: list[Run] = field(default_factory=list)
    messages: list[UserMessage] = field(default_factory=list)
    replies: list[Reply] = field(default_factory=list)
    deliveries: list[Delivery] = field(default_factory=list)
    heartbeats: list[Heartbeat] = field(default_factory=list)
    jobs: list[Job] = field(default_factory=list)
    faults: list[Disruption] = field(default_factory=list)
    exits: list[ProcessExit] = field(default_factory=list)
    accepted: list[int] = field(default_factory=list)  # ids the edge answered Queued for
    expected_faults: list[str] = field(default_factory=list)
    skipped_faults: list[str] = field(default_factory=list)
    snapshot: float = 0.0  # when SQL was read; the channel file was read just before
    grace: float = 10.0  # work younger than this at the snapshot may still be in flight
    allowance: float = 7.0  # lateness a heartbeat may have after the last fault ended
    load_factor: float = 1.0  # the machine's load over its cores; the allowance grows with it
    interrupt_window: float = 1.0  # a kill or pause this soon after a send may cut its commit
    recovery_bound: float = 10.0  # seconds a fault may take to recover, times the load factor
    # Seconds by which one fault's recovery varies with where it falls in a lease: a lock or a
    # worker's entry that was fresh or about to lapse when the fault struck. Growth over a run
    # is judged above this (the run's lock lease).
    growth_floor: float = 3.0
    webhook: list[WebhookHit] = field(default_factory=list)  # what the webhook receiver got
    webhook_records: dict[str, str] = field(default_factory=dict)  # its keys' delivery states
    attempts: list[Attempt] = field(default_factory=list)  # the attacking tenant's
    tenant_sessions: list[TenantSession] = field(default_factory=list)
    tenant_control: str | None = None  # its one legitimate session (a webhook to the receiver)
    tenant_route: str | None = None  # that session's URL, the receiver the operator allowed
    leaks: list[str] = field(default_factory=list)  # delivered texts that held a secret


def inside_hours(hours: str | None, at: float) -> bool:
    """Whether epoch second ``at`` is inside active hours ``hours`` (None: always)."""
    if hours is None:
        return True
    moment = datetime.fromtimestamp(at, UTC)
    return ActiveHours.from_text(hours).next_open(moment) == moment


def on_schedule(ev: Evidence, hb: Heartbeat) -> bool:
    """An active heartbeat whose active hours (if any) hold from its set time to the snapshot:
    one that must keep firing. (One outside its hours must not fire at all.)"""
    return hb.active and inside_hours(hb.hours, hb.set_at) and inside_hours(hb.hours, ev.snapshot)
