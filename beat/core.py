"""One beat tick: claim what is due, group it by owning worker, publish one message each.

Cost per tick depends on what is due (batched Lua claims per shard), not on how many
heartbeats are scheduled; beat does no per-fire SQL. The restore pass is paged: a tick reads at
most ``HBGW_RESTORE_PAGE`` rows of SQL for it. Replicas split the due-index shards among
themselves (``hbgw/state/beat_registry.py``): each claims and sweeps only its own, and claims stay
atomic, so replicas that briefly disagree about a shard only contend for it.
"""

from __future__ import annotations

import contextlib
import logging
from collections import defaultdict
from datetime import datetime, timedelta

from hbgw.beat.held_fires import HeldFires
from hbgw.beat.inbox_sweep import DRAIN_REASK_MS as DRAIN_REASK_MS
from hbgw.beat.inbox_sweep import InboxSweep
from hbgw.beat.reconcile import Reconciler
from hbgw.beat.restore import RestoreConfig, Restorer, StepReport
from hbgw.beat.retention import RetentionStep
from hbgw.beat.stop_flag import StopFlag
from hbgw.core.clock import from_ms, to_ms
from hbgw.core.metrics import count_delivery, gateway_metrics
from hbgw.sessions.states import (
    DeliveryState,
    LostLockDetail,
    RefundReason,
    RunState,
    job_member,
    job_of_member,
)
from hbgw.state.beat_registry import BeatRegistry, beat_name, names, shards_of
from hbgw.state.dispatch import Dispatcher
from hbgw.state.due_index import Claim
from hbgw.state.failures import log_failure
from hbgw.state.ownership import Rendezvous
from hbgw.state.restore_sweep import RestoreSweep, SweepState
from hbgw.state.retention_lease import RetentionLease
from hbgw.state.runtime import Runtime

log = logging.getLogger("hbgw.beat")

MIN_SLEEP = 0.05
# The backlog gauge costs one pipelined ZCOUNT per shard: bounded, not per fire or per tick.
BACKLOG_EVERY_MS = 5000
# One restore step takes well under a second; a replica that dies in one delays the next step
# by at most this.
RESTORE_STEP_LEASE_MS = 10_000
NOT_READ = -1  # ``BeatCore.next_due_ms`` when this tick made no claim


class BeatCore:
    def __init__(self, rt: Runtime, dispatcher: Dispatcher, *, name: str | None = None) -> None:
        self.rt = rt
        self.name = name or beat_name()
        self.beats = BeatRegistry(rt.client, rt.keys, ttl_ms=int(rt.settings.beat_ttl * 1000))
        # The shards this replica claims, sweeps and measures; set by every tick.
        self.own_shards: list[int] = []
        self.dispatcher = dispatcher
        self.stopping = StopFlag()
        self.next_backlog_ms = 0
        self.next_reconcile_ms = 0
        self.inboxes = InboxSweep(rt.gate, rt.redis, rt.index.shards, dispatcher, self.stopping)
        self.reconciler = Reconciler(rt.settings, rt.registry, rt.liveness, rt.gate, rt.redis)
        s = rt.settings
        self.lease_ms = int(s.claim_lease * 1000)
        self.reconcile_every_ms = int(s.reconcile_interval * 1000)
        self.max_sleep = s.beat_max_sleep
        self.held = HeldFires(int(s.beat_hold * 1000))
        # The earliest due time of the own shards as the tick's claim read it (NOT_READ: none).
        self.next_due_ms: int | None = NOT_READ
        self.restorer = Restorer(
            rt.store.restore,
            rt.store.jobs,
            rt.index,
            rt.gate,
            RestoreSweep(rt.client, rt.keys),
            RestoreConfig(
                page=s.restore_page,
                interval_ms=int(s.restore_interval * 1000),
                slack_ms=int(max(s.claim_lease, s.refund_backoff) * 1000) + 1000,
                lease_ms=RESTORE_STEP_LEASE_MS,
            ),
        )
        self.retention = RetentionStep(rt.store.retention, RetentionLease(rt.client, rt.keys), s)

    def tick(self) -> float:
        """Do one pass; return the seconds until the next one is useful."""
        # One reading per pass: every step judges "due" and "stale" against the same instant.
        now_ms = self.rt.now_ms()
        workers, sweep = self.refresh_registries(now_ms)
        restored = self.restore_step(now_ms, sweep)
        if not restored.rebuilding:  # a rebuild's ticks go to the rebuild
            self.retention.step(now_ms)
        if now_ms >= self.next_reconcile_ms:
            self.next_reconcile_ms = now_ms + self.reconcile_every_ms
            self.reconcile_now(now_ms)
        gateway_metrics().live_workers.set(len(workers))
        if now_ms >= self.next_backlog_ms:
            self.measure_backlog(now_ms)
            self.next_backlog_ms = now_ms + BACKLOG_EVERY_MS
        self.next_due_ms = NOT_READ
        if workers and not self.stopping.is_set():
            # Cron jobs wait for a rebuild to end: their target's inbox and fence are back then.
            self.dispatch_due(now_ms, workers, jobs=not restored.rebuilding)
            self.sweep_inboxes(workers, now_ms)
        if restored.rebuilding and not self.stopping.is_set():
            return MIN_SLEEP  # Redis lost its data: the next page of the rebuild without a pause
        if self.held and workers:
            return MIN_SLEEP  # held fires go out as soon as their worker's queue is empty
        # Read with the claims when they were made this tick: no round trip of its own.
        earliest: int | None = self.next_due_ms
        if earliest == NOT_READ:
            earliest = self.rt.index.earliest_ms(self.own_shards)
        if earliest is None or not workers:
            return self.max_sleep
        return min(self.max_sleep, max(MIN_SLEEP, (earliest - now_ms) / 1000))

    def refresh_registries(self, now_ms: int) -> tuple[list[str], SweepState]:
        """``refresh_shards``, the live workers and the restore sweep's state, in one round
        trip; returns the workers and that state."""
        pipe = self.rt.client.pipeline(transaction=False)
        self.beats.queue_refresh(pipe, self.name, now_ms)
        self.rt.registry.queue_live(pipe, now_ms)
        self.restorer.sweep.queue_read(pipe)
        *_, beats, workers, sweep = pipe.execute()
        self.own_beats(names(beats))
        return names(workers), RestoreSweep.state_of(sweep)

    def refresh_shards(self, now_ms: int) -> None:
        """Refresh this beat's registry entry and recompute the shards it owns.

        Every tick, in one round trip: an entry Redis lost (a restart) is back at once, and a
        dead beat's shards are taken over one ``HBGW_BEAT_TTL`` after its last tick.
        """
        self.own_beats(self.beats.refresh_and_list(self.name, now_ms))

    def own_beats(self, beats: list[str]) -> None:
        """The shards this beat owns among the live ``beats``."""
        owned = shards_of(self.name, beats, self.rt.index.shards)
        if owned != self.own_shards:
            log.info(
                "beat: %s owns %d of %d shards among %d live beats: %s",
                self.name,
                len(owned),
                self.rt.index.shards,
                len(beats),
                owned,
                extra={"action": "beat.shards"},
            )
        self.own_shards = owned
        metrics = gateway_metrics()
        metrics.live_beats.set(len(beats))
        metrics.owned_shards.set(len(self.own_shards))

    def leave(self) -> None:
        """Send what this beat holds, then drop its registry entry (a clean stop): the others
        take its shards at once."""
        try:
            if self.held:
                now_ms = self.rt.now_ms()
                self.send_held(self.rt.registry.live(now_ms), now_ms)
        finally:
            self.beats.remove(self.name)

    def measure_backlog(self, now_ms: int) -> None:
        """Due members of each own shard before this tick claims: what waits when workers fall
        behind. Each shard is reported by the beat that owns it, so replicas never report one
        twice and summing over beats gives the whole backlog."""
        gauge = gateway_metrics().due_backlog
        backlog = self.rt.index.backlog(now_ms, self.own_shards)
        for shard in range(self.rt.index.shards):
            if shard in backlog:
                gauge.labels(str(shard)).set(backlog[shard])
            else:
                # A shard that moved to another beat: its figure is that beat's to report.
                with contextlib.suppress(KeyError):
                    gauge.remove(str(shard))

    def restore_step(self, now_ms: int, sweep: SweepState | None = None) -> StepReport:
        """The tick's share of the restore pass (nothing when none is due or another replica
        runs it); orphan recovery runs once per pass, as it begins."""
        report = self.restorer.step(now_ms, state=sweep)
        if report.started:
            self.recover_orphans(from_ms(now_ms))
            self.settle_cut_off(from_ms(now_ms))
            self.ask_delivery_retries(now_ms)
        return report

    def restore_now(self, now_ms: int) -> StepReport:
        """A whole restore pass in this call, then orphan recovery (tests and tools)."""
        report = self.restorer.run_sweep(now_ms)
        if report.ran and report.ok:
            self.recover_orphans(from_ms(now_ms))
            self.settle_cut_off(from_ms(now_ms))
            self.ask_delivery_retries(now_ms)
        return report

    def reconcile_now(self, now_ms: int) -> None:
        """Liveness pass; a failure is logged and never costs the tick its dispatch."""
        try:
            self.reconciler.run(now_ms)
        except Exception as exc:
            log_failure(log, "liveness reconcile failed", exc, action="reconcile.failed")

    def recover_orphans(self, now: datetime) -> int:
        """Refund reservations left by workers that died before the agent started.

        A reservation older than a lock lease whose session lock is free can no longer start
        (its writes are fenced); giving it back keeps the fire count exact and lets the fire
        run again now instead of one interval later.
        """
        rt = self.rt
        before = now - timedelta(seconds=rt.settings.lock_lease)
        recovered = 0
        # Bounded like a restore step; the oldest first, the rest on the next pass.
        for run in rt.store.ledger.stale_reservations(before, limit=rt.settings.restore_page):
            if rt.gate.lock_holder(run.session_id) is not None:
                continue
            if rt.store.ledger.refund_orphan(run.key, now) is not None:
                metrics = gateway_metrics()
                metrics.fires.labels(RunState.REFUNDED.value).inc()
                metrics.refunds.labels(RefundReason.ORPHANED.name.lower()).inc()
                # Due again at once, under a new fire id (the old one is in the ledger).
                if run.job_id is not None:
                    if rt.due.settle_job(run.job_id) is not None:
                        rt.index.schedule(job_member(run.job_id), to_ms(now))
                elif rt.due.settle(run.session_id) is not None:
                    rt.index.schedule(run.session_id, to_ms(now))
                recovered += 1
        if recovered:
            log.info(
                "refunded %d orphaned reservations", recovered, extra={"action": "beat.orphans"}
            )
        return recovered

    def settle_cut_off(self, now: datetime) -> int:
        """End ``failed`` the runs cut off in a session that never got another grant.

        A newer grant settles what older turns left (``claim_fence``); a session that gets
        none would keep such a run ``started`` or ``delivering`` for ever. A run in its turn
        for longer than HBGW_DEAD_AFTER whose session lock is free has no turn left to end it
        (a turn renews its lock while it runs), so it is settled here, fenced: a grant that
        came meanwhile settled it already.
        """
        rt = self.rt
        before = now - timedelta(seconds=rt.settings.dead_after)
        settled = 0
        for run in rt.store.ledger.stale_turns(before, limit=rt.settings.restore_page):
            if rt.gate.lock_holder(run.session_id) is not None:
                continue
            ended = rt.store.ledger.settle_cut_off(run.key, now)
            if ended is not None:
                gateway_metrics().fires.labels(RunState.FAILED.value).inc()
                if ended.detail == LostLockDetail.CUT_OFF_DURING_DELIVERY:
                    count_delivery(rt.settings.channel, DeliveryState.UNKNOWN.value)
                settled += 1
        if settled:
            log.warning(
                "settled %d runs cut off without a later grant",
                settled,
                extra={"action": "beat.cut_off"},
            )
        self.settle_cut_off_deliveries(before, now)
        return settled

    def settle_cut_off_deliveries(self, before: datetime, now: datetime) -> int:
        """A user turn's delivery left ``pending`` since ``before`` with its session lock free:
        its turn was cut off between the send and the record, so its outcome is ``unknown``
        (the reply that a later grant sends carries the possible-repeat mark)."""
        rt, deliveries = self.rt, self.rt.store.deliveries
        unknown = 0
        for delivery in deliveries.stale_deliveries(before, limit=rt.settings.restore_page):
            if rt.gate.lock_holder(delivery.session_id) is not None:
                continue
            if deliveries.settle_cut_off_delivery(delivery.id, delivery.fence, now) is not None:
                count_delivery(delivery.channel, DeliveryState.UNKNOWN.value)
                unknown += 1
        if unknown:
            log.warning(
                "%d deliveries cut off between the send and its record: outcome unknown",
                unknown,
                extra={"action": "beat.delivery_unknown"},
            )
        return unknown

    def ask_delivery_retries(self, now_ms: int) -> int:
        """Ask the owner of each session with a delivery retry due for a drain: its grant sends
        the retries first (``workers/delivery_retry.py``). A session whose lock is held is
        asked again at the next pass (its turn does not look for retries)."""
        rt, asked = self.rt, 0
        try:
            deliveries = rt.store.deliveries
            due = deliveries.sessions_with_due_retries(from_ms(now_ms), rt.settings.restore_page)
            for sid in due:
                owner = rt.registry.owner(sid, now_ms)
                if owner is not None and rt.gate.lock_holder(sid) is None:
                    self.dispatcher.drain(owner, sid)
                    asked += 1
        except Exception as exc:  # the next pass asks again; the tick's dispatch goes on
            log_failure(log, "delivery retries not asked for", exc, action="beat.retries_failed")
        return asked

    def dispatch_due(self, now_ms: int, workers: list[str], *, jobs: bool = True) -> int:
        """Claim what is due in this beat's shards and publish it; ``jobs`` False: cron jobs'
        members are put back as they were (a rebuild is under way), heartbeats go on."""
        claims = self.rt.index.claim_round(
            now_ms, self.lease_ms, self.rt.settings.claim_batch, shards=self.own_shards
        )
        claimed, self.next_due_ms = claims.claims, claims.earliest_ms
        kept = self.held.take()
        if not jobs:
            held = {m: due for m, due in claimed + kept if job_of_member(m) is not None}
            if held:
                self.rt.index.schedule_many(held)
                self.next_due_ms = NOT_READ  # due again at once: read the index afresh
                claimed = [c for c in claimed if c[0] not in held]
                self.held.release([c for c in kept if c[0] in held])
                kept = [c for c in kept if c[0] not in held]
        gateway_metrics().claim_batch.observe(len(claimed))
        known = set(kept)
        groups = group_by_owner(kept + [c for c in claimed if c not in known], workers)
        sent = self.send(groups, now_ms)
        if claimed:
            log.info(
                "claimed %d due heartbeats for %d workers (%d held for busy queues)",
                len(claimed),
                len(groups),
                len(self.held),
                extra={"action": "beat.dispatch", "sent": sent},
            )
        return len(claimed)

    def send(self, groups: dict[str, list[Claim]], now_ms: int, *, hold: bool = True) -> int:
        """Each worker's fires in one message, all the tick's messages in one batch; a worker
        whose queue still has a message waiting gets its fires in a later one
        (``beat/held_fires.py``). Returns the fires sent."""
        if not groups:
            return 0
        sent = 0
        with self.dispatcher.batch():
            holding = hold and self.held.hold_ms > 0 and not self.stopping.is_set()
            waiting = self.dispatcher.waiting(groups) if holding else {}
            for owner, fires in groups.items():
                busy = holding and waiting.get(owner, 0) > 0
                if self.held.settle(fires, waiting=busy, now_ms=now_ms):
                    self.dispatcher.fires(owner, fires)
                    sent += len(fires)
        return sent

    def send_held(self, workers: list[str], now_ms: int) -> int:
        """A stopping beat sends what it holds: nothing waits for the claim lease."""
        return self.send(group_by_owner(self.held.take(), workers), now_ms, hold=False)

    def sweep_inboxes(self, workers: list[str], now_ms: int | None = None) -> None:
        """Re-dispatch queued user messages whose session has no turn running
        (``beat/inbox_sweep.py``), for the sessions of this beat's own shards."""
        now_ms = self.rt.now_ms() if now_ms is None else now_ms
        self.inboxes.run(set(self.own_shards), workers, now_ms)


def group_by_owner(claimed: list[Claim], workers: list[str]) -> dict[str, list[Claim]]:
    """The claimed fires of each owning worker, in claim order (empty without workers: a
    fire nobody owns comes back after its claim lease)."""
    groups: dict[str, list[Claim]] = defaultdict(list)
    owner_of = Rendezvous(workers).owner
    for claim in claimed:
        owner = owner_of(claim[0])
        if owner is not None:
            groups[owner].append(claim)
    return groups


def safe_tick(core: BeatCore) -> float:
    """One tick that never raises: beat outlives any Redis, broker or database failure."""
    try:
        return core.tick()
    except Exception as exc:
        log_failure(log, "beat tick failed, retrying next tick", exc, action="beat.tick_failed")
    return core.max_sleep
