"""The liveness reconciler: one pass every HBGW_RECONCILE_INTERVAL seconds, from beat's tick.

It judges every stamp (``state.liveness.judge``), sets the ``hbgw_stalled_sessions`` gauge,
queues one alert per stall for HBGW_ALERT_WEBHOOK (``beat.alerts`` sends it off the tick), and
frees the sessions whose worker is gone: their stamp is removed and their queued work is handed
to beat's inbox sweeper, which sends it to the session's new owner once the dead worker's lock
lease has run out. Heartbeat fires such a worker had reserved are refunded by the restore pass
(``BeatCore.recover_orphans``).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from hbgw.beat.alerts import AlertSender
from hbgw.core.metrics import gateway_metrics
from hbgw.core.outbound import OutboundGuard
from hbgw.core.settings import Settings
from hbgw.state.liveness import (
    DEAD,
    STALE,
    Liveness,
    Thresholds,
    Verdict,
    finished_long_ago,
    judge,
)
from hbgw.state.ownership import WorkerRegistry
from hbgw.state.redis_part import RedisPart
from hbgw.state.turn_gate import TurnGate

log = logging.getLogger("hbgw.reconcile")

# How long a sent alert is remembered: a stall that outlives it is announced once more, a reminder.
ALERT_MEMORY_S = 24 * 3600


@dataclass
class ReconcileReport:
    stale: int = 0
    dead: int = 0
    # Sessions whose alert was queued for the webhook (the sender thread POSTs it).
    alerted: list[str] = field(default_factory=list)
    freed: list[str] = field(default_factory=list)


class Reconciler:
    """Reads the stamps (``liveness``) and the live workers (``registry``), marks each alert
    once in Redis (``redis``) and asks the turn gate for a freed session's backlog; it never
    touches the SQL store."""

    def __init__(
        self,
        s: Settings,
        registry: WorkerRegistry,
        liveness: Liveness,
        gate: TurnGate,
        redis: RedisPart,
    ) -> None:
        self.registry, self.liveness, self.gate, self.redis = registry, liveness, gate, redis
        self.limits = Thresholds(s.stale_after, s.dead_after)
        webhook = s.alert_webhook.get_secret_value() if s.alert_webhook else None
        secret = s.alert_webhook_secret.get_secret_value() if s.alert_webhook_secret else None
        # Alerts leave from the sender's thread, never from the tick (see beat/alerts.py).
        # They go only where a tenant's webhook may (core/outbound.py), or to the allowlist.
        guard = OutboundGuard(s.outbound_allowlist)
        self.alerts = AlertSender(webhook, secret, guard) if webhook else None
        if webhook and not secret:
            log.warning(
                "liveness: alerts go unsigned; set HBGW_ALERT_WEBHOOK_SECRET so the receiver "
                "can tell them from forgeries",
                extra={"action": "reconcile.alerts_unsigned"},
            )

    def run(self, now_ms: int) -> ReconcileReport:
        live = self.registry.live(now_ms)
        stamps = self.liveness.all()
        verdicts = judge(stamps, now_ms, self.limits, live)
        report = ReconcileReport(
            stale=sum(v.verdict == STALE for v in verdicts),
            dead=sum(v.verdict == DEAD for v in verdicts),
        )
        stalled = gateway_metrics().stalled
        stalled.labels(STALE.rstrip("?")).set(report.stale)
        stalled.labels(DEAD.rstrip("?")).set(report.dead)
        for verdict in verdicts:
            if verdict.verdict != DEAD:
                continue
            if self._first_alert(verdict) and self._alert(verdict):
                report.alerted.append(verdict.stamp.session)
            if self._worker_gone(verdict, live) and self._free(verdict):
                report.freed.append(verdict.stamp.session)
        for done in finished_long_ago(stamps, now_ms, self.limits):
            self.liveness.clear(done)  # unless the session started a new turn meanwhile
        if report.stale or report.dead:
            log.warning(
                "liveness: %d stale, %d dead turns",
                report.stale,
                report.dead,
                extra={"action": "reconcile.stalled"},
            )
        return report

    def _first_alert(self, verdict: Verdict) -> bool:
        """True once per stall, across beat replicas: the stall is the stamp that stopped."""
        stamp = verdict.stamp
        key = self.redis.keys.stall_alerted(stamp.session)
        before = self.redis.client.set(key, str(stamp.at_ms), ex=ALERT_MEMORY_S, get=True)
        return before != str(stamp.at_ms)

    def _alert(self, verdict: Verdict) -> bool:
        sid = verdict.stamp.session
        log.warning(
            "liveness: turn of %s is dead? (%s, last phase %s)",
            sid,
            verdict.reason,
            verdict.stamp.phase,
            extra={"action": "reconcile.dead", "session": sid},
        )
        if self.alerts is None:
            return False
        return self.alerts.submit({"event": "hbgw.turn_stalled", **verdict.to_json()})

    @staticmethod
    def _worker_gone(verdict: Verdict, live: list[str]) -> bool:
        stamp = verdict.stamp
        return not stamp.external and stamp.worker not in live

    def _free(self, verdict: Verdict) -> bool:
        sid = verdict.stamp.session
        if not self.liveness.clear(verdict.stamp):
            return False  # stamped again since: a worker has the session now
        if self.gate.backlog(sid) > 0:
            # The sweeper re-dispatches it to the owner among the live workers.
            self.redis.client.sadd(self.redis.keys.inbox_sessions(), sid)
        log.info(
            "liveness: freed %s (worker %s is gone)",
            sid,
            verdict.stamp.worker,
            extra={"action": "reconcile.freed", "session": sid},
        )
        return True
