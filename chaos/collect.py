"""Read the evidence: the ledger, the messages and heartbeats from SQL, the channel's JSONL file.

The channel file is read before SQL: a send always precedes the write that records its turn, so
every send of a settled turn is matched by what SQL says a moment later.
"""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import datetime
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, select
from sqlalchemy.orm import Session

from chaos.evidence import Delivery, Heartbeat, Job, Reply, Run, TenantSession, UserMessage
from hbgw.sessions.grammar.cron import CronSchedule
from hbgw.sessions.grammar.job_schedule import OnceSchedule, job_next_fire
from hbgw.sessions.models import DeliveryRow, HeartbeatRow, JobRow, MessageRow, RunRow, SessionRow
from hbgw.sessions.states import JobStatus
from hbgw.sessions.store.job_records import job_state, schedule_of


def _ts(value: datetime | None) -> float | None:
    return None if value is None else value.timestamp()


def _int_or_none(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def read_channel(path: Path) -> list[Delivery]:
    if not path.exists():
        return []
    out = []
    for line in path.read_text().splitlines():
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            continue  # a line being written right now; it belongs to an unsettled turn
        if record.get("call") not in ("send", "typing"):
            continue
        out.append(
            Delivery(
                call=record["call"],
                session=record["session_id"],
                at=float(record["at"]),
                kind=record.get("kind"),
                reply_to=record.get("reply_to"),
                ref=record.get("ref"),
                delivery_key=record.get("delivery_key"),
                repeat=record.get("repeat") is True,
                fence=_int_or_none(record.get("fence")),
            )
        )
    return out


def read_tenant_sessions(engine: Engine, owner: str) -> list[TenantSession]:
    with Session(engine) as db:
        rows = db.scalars(select(SessionRow).where(SessionRow.owner == owner))
        return [TenantSession(r.id, r.platform, r.chat, r.webhook_url) for r in rows]


def delivered_leaks(path: Path, secrets: dict[str, str]) -> list[str]:
    """The channel's records (sends, progress) whose text holds one of ``secrets`` (name to
    value), as ``session: name`` — never the value itself."""
    if not path.exists():
        return []
    found = []
    for line in path.read_text().splitlines():
        for name, value in secrets.items():
            if value and value in line:
                try:
                    session = str(json.loads(line).get("session_id"))
                except json.JSONDecodeError:
                    session = "?"
                found.append(f"{session}: {name}")
    return found


def read_runs(engine: Engine) -> list[Run]:
    with Session(engine) as db:
        return [
            Run(
                fire_id=r.fire_id,
                session=r.session_id,
                fence=r.fence,
                state=str(r.state),
                reserved=r.reserved_at.timestamp(),
                started=_ts(r.started_at),
                finished=_ts(r.finished_at),
                worker=r.worker,
                detail=r.detail,
                job=r.job_id,
            )
            for r in db.scalars(select(RunRow).order_by(RunRow.id))
        ]


def read_messages(engine: Engine) -> tuple[list[UserMessage], list[Reply]]:
    with Session(engine) as db:
        rows = list(db.scalars(select(MessageRow).order_by(MessageRow.id)))
    users = [
        UserMessage(m.id, m.session_id, str(m.state), m.created_at.timestamp())
        for m in rows
        if m.role == "user" and m.kind == "user"
    ]
    replies = [
        Reply(m.id, m.session_id, m.reply_to, m.created_at.timestamp())
        for m in rows
        if m.role == "assistant" and m.reply_to is not None
    ]
    return users, replies


def read_heartbeats(engine: Engine) -> list[Heartbeat]:
    with Session(engine) as db:
        rows = db.execute(
            select(HeartbeatRow, SessionRow.status).join(
                SessionRow, SessionRow.id == HeartbeatRow.session_id
            )
        ).all()
    return [
        Heartbeat(
            session=hb.session_id,
            interval=float(hb.interval_seconds or 0),
            set_at=hb.set_at.timestamp(),
            active=str(hb.status) == "active" and str(status) == "active",
            hours=hb.active_hours,
            jittered=hb.exact is False,
        )
        for hb, status in rows
        if hb.interval_seconds
    ]


def read_jobs(engine: Engine) -> list[Job]:
    with Session(engine) as db:
        rows = list(db.scalars(select(JobRow).order_by(JobRow.id)))
    return [
        Job(
            id=row.id,
            session=row.session_id,
            period=_period(row),
            set_at=row.created_at.timestamp(),
            active=str(row.status) == "active",
            fixed=isinstance(schedule_of(row), CronSchedule),
            **_jitter(row),
        )
        for row in rows
    ]


def _jitter(row: JobRow) -> dict[str, Any]:
    """A jittered job's first due time after its add and its offset (``Job.first_due``)."""
    added = replace(
        job_state(row),
        status=JobStatus.ACTIVE,
        anchor=row.created_at,
        fire_count=0,
        times=None,
        last_fired=None,
        retry_at=None,
    )
    offset = added.offset().total_seconds()
    due = added.next_due()
    if not added.jitter_seed or isinstance(added.schedule, OnceSchedule) or due is None:
        return {}
    return {"first_due": due.timestamp(), "offset": offset}


def _period(row: JobRow) -> float:
    """Seconds between two due times (0: a one-shot)."""
    schedule = schedule_of(row)
    if isinstance(schedule, OnceSchedule):
        return 0.0
    first = job_next_fire(schedule, row.anchor_at, 0)
    second = job_next_fire(schedule, first, 0) if first else None
    return (second - first).total_seconds() if first and second else 0.0


def queued_messages(engine: Engine) -> int:
    with Session(engine) as db:
        return len(
            list(
                db.scalars(
                    select(MessageRow.id).where(
                        MessageRow.role == "user", MessageRow.state == "queued"
                    )
                )
            )
        )


def read_delivery_states(engine: Engine, keys: set[str]) -> dict[str, str]:
    """The delivery record's state of each key (the webhook receiver's keys)."""
    if not keys:
        return {}
    with Session(engine) as db:
        rows = db.execute(select(DeliveryRow.delivery_key, DeliveryRow.state)).all()
    return {key: str(state) for key, state in rows if key in keys}
