"""The heartbeat state machine. Pure: every function takes ``now`` and returns a new state."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from hbgw.core.errors import CommandError, InvalidState
from hbgw.sessions.grammar import (
    CronSchedule,
    IntervalSchedule,
    Schedule,
    format_interval,
    next_fire,
)
from hbgw.sessions.grammar.policy import NO_POLICY, Policy
from hbgw.sessions.jitter import jitter_offset
from hbgw.sessions.states import HeartbeatStatus

MAX_MISSED_COUNTED = 1000
MAX_QUIET_COUNTED = 32  # 2**32 times any interval is past every ceiling (at most 366d)


@dataclass(frozen=True)
class HeartbeatState:
    prompt: str
    schedule: Schedule
    schedule_text: str
    status: HeartbeatStatus
    anchor: datetime
    fire_count: int
    generation: int
    origin_chat: str
    origin_thread: str | None
    last_fired: datetime | None = None
    last_outcome: str | None = None
    # Why it is paused when its route refused a delivery for good (None: paused by a person).
    paused_reason: str | None = None
    policy: Policy = NO_POLICY
    ends_at: datetime | None = None
    """``for 7d``: the set time plus that; no fire is due after it."""
    jitter_seed: str = ""
    """The session id the jitter offset is drawn from ("" or ``exact``: none)."""
    quiet_fires: int = 0
    """Fires in a row whose reply was silent or a held-back repeat (``backoff`` counts them)."""
    last_reply_hash: str | None = None
    """The digest of the last reply delivered (``sessions.dedupe``: its route and its text)."""
    last_reply_at: datetime | None = None

    def next_due(self) -> datetime | None:
        """Interval: anchor + interval. Cron: the first occurrence after the anchor. Then the
        jitter offset, and active hours: a due time outside them moves to the next start (plus
        the offset); None when it would come after the end."""
        if self.status != HeartbeatStatus.ACTIVE:
            return None
        if self.policy.times is not None and self.fire_count >= self.policy.times:
            return None
        due = self._scheduled()
        hours = self.policy.hours
        if hours is not None and (opened := hours.next_open(due)) != due:
            staggered = opened + self._offset()
            due = staggered if hours.next_open(staggered) == staggered else opened
        if self.ends_at is not None and due > self.ends_at:
            return None
        return due

    def outside_hours(self) -> bool:
        """Whether active hours moved the next due time (status says so)."""
        hours = self.policy.hours
        if hours is None or self.status != HeartbeatStatus.ACTIVE:
            return False
        due = self._scheduled()
        return hours.next_open(due) != due

    def interval_seconds(self) -> int | None:
        """The interval now: the schedule's, doubled for each quiet fire up to the ``backoff``
        ceiling; None for a cron schedule."""
        if not isinstance(self.schedule, IntervalSchedule):
            return None
        base, ceiling = self.schedule.seconds, self.policy.backoff
        if ceiling is None or self.quiet_fires == 0:
            return base
        doubled: int = base << min(self.quiet_fires, MAX_QUIET_COUNTED)
        return max(base, min(doubled, ceiling))

    def backing_off(self) -> bool:
        """Whether quiet fires have stretched the interval (status says so)."""
        interval = self.interval_seconds()
        return isinstance(self.schedule, IntervalSchedule) and interval != self.schedule.seconds

    def _current(self) -> Schedule:
        interval = self.interval_seconds()
        return self.schedule if interval is None else IntervalSchedule(interval)

    def _scheduled(self) -> datetime:
        due = next_fire(self._current(), self.anchor)
        # An interval keeps the phase of its first fire: the offset is added once, to a due
        # time counted from a set or resume (the anchor then is not a fire time).
        if isinstance(self.schedule, CronSchedule) or self.anchor != self.last_fired:
            due += self._offset()
        return due

    def _offset(self) -> timedelta:
        if self.policy.exact or not self.jitter_seed:
            return timedelta(0)
        if isinstance(self.schedule, IntervalSchedule):
            period = float(self.schedule.seconds)
        else:
            first = next_fire(self.schedule, self.anchor)
            period = (next_fire(self.schedule, first) - first).total_seconds()
        return jitter_offset(self.jitter_seed, period)

    def is_due(self, now: datetime) -> bool:
        due = self.next_due()
        return due is not None and now >= due

    def missed(self, now: datetime) -> int:
        """Due times that passed without a fire, besides the one a fire now would serve."""
        due = self.next_due()
        if due is None or now < due:
            return 0
        interval = self.interval_seconds()
        if interval is not None:
            return int((now - due).total_seconds() // interval)
        count, moment = 0, due
        # A metric only: the cap keeps a years-late every-minute cron cheap (~0.2 ms per step).
        while count < MAX_MISSED_COUNTED:
            moment = next_fire(self.schedule, moment)
            if moment > now:
                break
            count += 1
        return count

    def describe(self) -> str:
        policy = self.policy.describe()
        return f"{self.schedule.describe()} {policy}" if policy else self.schedule.describe()


def set_heartbeat(
    current: HeartbeatState | None,
    *,
    schedule: Schedule,
    schedule_text: str,
    prompt: str,
    origin_chat: str,
    origin_thread: str | None,
    now: datetime,
    policy: Policy = NO_POLICY,
    jitter_seed: str = "",
) -> HeartbeatState:
    """Set or replace: the count starts at 0 and the clock anchors to now."""
    generation = current.generation + 1 if current else 1
    lasts = policy.lasts
    state = HeartbeatState(
        prompt=prompt,
        schedule=schedule,
        schedule_text=schedule_text,
        status=HeartbeatStatus.ACTIVE,
        anchor=now,
        fire_count=0,
        generation=generation,
        origin_chat=origin_chat,
        origin_thread=origin_thread,
        policy=policy,
        ends_at=None if lasts is None else now + timedelta(seconds=lasts),
        jitter_seed=jitter_seed,
        # The route's memory of its last reply outlives a new setting (dedupe is per route).
        last_reply_hash=current.last_reply_hash if current else None,
        last_reply_at=current.last_reply_at if current else None,
    )
    _check_backoff(schedule, policy)
    if state.next_due() is None:
        raise CommandError(
            "This heartbeat would never fire — its first due time comes after its end "
            f"(for {format_interval(lasts or 0)}); give a longer 'for' or a shorter interval."
        )
    return state


def _check_backoff(schedule: Schedule, policy: Policy) -> None:
    if policy.backoff is None:
        return
    if not isinstance(schedule, IntervalSchedule):
        raise CommandError(
            "'backoff' doubles an interval — give the schedule as every <interval>, not cron."
        )
    if policy.backoff <= schedule.seconds:
        raise CommandError(
            f"'backoff {format_interval(policy.backoff)}' is the ceiling the interval doubles "
            f"up to — give more than the interval ({format_interval(schedule.seconds)})."
        )


def after_reply(
    state: HeartbeatState, *, quiet: bool, delivered_hash: str | None, now: datetime
) -> HeartbeatState:
    """A fire's reply is recorded: ``quiet`` (silent, or a repeat held back) counts towards the
    backoff; anything else snaps the interval back. ``delivered_hash``: the digest of a reply
    that was delivered, remembered with the time for dedupe."""
    quiet_fires = min(state.quiet_fires + 1, MAX_QUIET_COUNTED) if quiet else 0
    if state.policy.backoff is None:
        quiet_fires = 0
    if delivered_hash is None:
        return replace(state, quiet_fires=quiet_fires)
    return replace(
        state, quiet_fires=quiet_fires, last_reply_hash=delivered_hash, last_reply_at=now
    )


def user_spoke(state: HeartbeatState, now: datetime) -> HeartbeatState | None:
    """The user spoke in the session: a backed-off heartbeat snaps back to its interval,
    counted from now (no instant catch-up fire, as on resume); None when nothing changes."""
    if state.quiet_fires == 0:
        return None
    return replace(state, quiet_fires=0, anchor=now)


def _require_live(current: HeartbeatState | None, verb: str) -> HeartbeatState:
    if current is None or current.status == HeartbeatStatus.CLEARED:
        raise InvalidState(
            f"There is no heartbeat to {verb} in this session — set one with "
            "/heartbeat every 10m <instruction>."
        )
    return current


def pause(current: HeartbeatState | None, now: datetime) -> HeartbeatState:
    state = _require_live(current, "pause")
    if state.status == HeartbeatStatus.PAUSED:
        raise InvalidState("The heartbeat is already paused — /heartbeat resume starts it again.")
    return replace(state, status=HeartbeatStatus.PAUSED, generation=state.generation + 1)


def resume(current: HeartbeatState | None, now: datetime) -> HeartbeatState:
    """Active again, re-anchored to now: resuming never causes an instant catch-up fire."""
    state = _require_live(current, "resume")
    if state.status == HeartbeatStatus.ACTIVE:
        raise InvalidState("The heartbeat is already active.")
    return replace(
        state,
        status=HeartbeatStatus.ACTIVE,
        anchor=now,
        generation=state.generation + 1,
        paused_reason=None,
        quiet_fires=0,
    )


def pause_for_route(current: HeartbeatState, reason: str) -> HeartbeatState:
    """Paused by the gateway with ``reason``: its route refused a message for good (no fire
    spends tokens on a chat nobody can read), or its token budget for the day is spent. Until
    a person resumes it (which clears ``reason``)."""
    return replace(
        current,
        status=HeartbeatStatus.PAUSED,
        generation=current.generation + 1,
        paused_reason=reason,
    )


def clear(current: HeartbeatState | None, now: datetime) -> HeartbeatState:
    state = _require_live(current, "clear")
    return replace(state, status=HeartbeatStatus.CLEARED, generation=state.generation + 1)


def reserve(state: HeartbeatState, now: datetime) -> HeartbeatState:
    """One fire, however late: the count goes up once and the anchor moves to the fire time."""
    return replace(state, fire_count=state.fire_count + 1, anchor=now, last_fired=now)


def refund(
    state: HeartbeatState, *, prev_anchor: datetime, prev_last_fired: datetime | None
) -> HeartbeatState:
    return replace(
        state,
        fire_count=max(0, state.fire_count - 1),
        anchor=prev_anchor,
        last_fired=prev_last_fired,
    )


def schedule_columns(schedule: Schedule) -> tuple[int | None, str | None, str | None]:
    """(interval_seconds, cron, timezone) as stored."""
    if isinstance(schedule, IntervalSchedule):
        return schedule.seconds, None, None
    return None, schedule.expr, schedule.timezone


def schedule_from_columns(
    interval_seconds: int | None, cron: str | None, timezone: str | None
) -> Schedule:
    if cron is not None:
        return CronSchedule(expr=cron, timezone=timezone or "UTC")
    if interval_seconds is None:
        raise ValueError("a heartbeat row has neither an interval nor a cron expression")
    return IntervalSchedule(seconds=interval_seconds)


Transition = Callable[[HeartbeatState | None, datetime], HeartbeatState]
