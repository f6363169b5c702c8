"""The gateway's Prometheus metrics: one registry per process (beat, worker), served on
``HBGW_METRICS_PORT``. The API keeps a registry of its own (``hbgw/gateway/api/metrics.py``).

Names are a contract with the Helm chart's dashboard and alerts (``helm/``): rename one and
they go blind. Labels never carry a session id or text: their number must stay bounded.
"""

from __future__ import annotations

import logging
from functools import lru_cache

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server

log = logging.getLogger("hbgw.metrics")

LAG_BUCKETS = (0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 120, 300, 900)
TURN_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 120, 300)
BATCH_BUCKETS = (0, 1, 2, 5, 10, 25, 50, 100, 250, 500, 1000)
# The chat platforms the gateway knows (a closed set, so no request or session mints a series):
# the inbound routes count their refusals by it (``hbgw/gateway/platforms/guard.py``) and
# ``hbgw_deliveries_total`` its deliveries. Core holds it because core imports nothing above it.
CHAT_PLATFORMS = ("slack", "telegram", "discord", "webhook")
# The closed ``platform`` label values of ``hbgw_deliveries_total``: the channel that delivered
# it — a chat platform's own client, or the local channel that recorded it for a platform
# without one (console, file) — else ``other``. The outcomes are the
# delivery record's states after a send (``sessions.states.DELIVERY_OUTCOMES``).
LOCAL_CHANNELS = ("console", "file")
DELIVERY_PLATFORMS = (*CHAT_PLATFORMS, *LOCAL_CHANNELS, "other")
DELIVERY_OUTCOMES = ("sent", "failed", "suppressed", "unknown", "retrying")


class GatewayMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.fires = Counter(
            "hbgw_fires",
            "Heartbeat fires that ended, by outcome (run state).",
            ["outcome"],
            registry=r,
        )
        self.refunds = Counter(
            "hbgw_refunds",
            "Reservations given back before the agent started, by reason.",
            ["reason"],
            registry=r,
        )
        self.fire_lag = Histogram(
            "hbgw_fire_lag_seconds",
            "Seconds from a fire's due time to its agent start.",
            buckets=LAG_BUCKETS,
            registry=r,
        )
        self.turn_duration = Histogram(
            "hbgw_turn_seconds",
            "Seconds a turn took, agent and delivery, by kind.",
            ["kind"],
            buckets=TURN_BUCKETS,
            registry=r,
        )
        self.user_turns = Counter(
            "hbgw_user_turns", "User turns that ended, by outcome.", ["outcome"], registry=r
        )
        self.claim_batch = Histogram(
            "hbgw_claim_batch_size",
            "Due heartbeats one beat tick claimed, over every shard (0 included).",
            buckets=BATCH_BUCKETS,
            registry=r,
        )
        self.due_backlog = Gauge(
            "hbgw_due_backlog",
            "Members of the due index whose time has come, by shard.",
            ["shard"],
            registry=r,
        )
        self._add_delivery_metrics(r)
        self._add_cost_metrics(r)
        self._add_liveness_metrics(r)
        self._add_registry_gauges(r)

    def _add_delivery_metrics(self, r: CollectorRegistry) -> None:
        """The delivery records' outcomes, as the worker (and beat, for ``unknown``) wrote them."""
        self.deliveries = Counter(
            "hbgw_deliveries",
            "Outbound messages by platform and outcome (sent, failed, suppressed, unknown, "
            "retrying: an attempt that failed for now and will be sent again).",
            ["platform", "outcome"],
            registry=r,
        )
        for platform in DELIVERY_PLATFORMS:  # every series from the start: rates need a zero
            for outcome in DELIVERY_OUTCOMES:
                self.deliveries.labels(platform, outcome)

    def _add_cost_metrics(self, r: CollectorRegistry) -> None:
        """What heartbeat turns spend; per heartbeat and day (a session id is no label): its
        status and `hbgw runs`."""
        self.heartbeat_tokens = Counter(
            "hbgw_heartbeat_tokens", "Tokens heartbeat turns spent.", registry=r
        )
        self.budget_pauses = Counter(
            "hbgw_heartbeat_budget_pauses",
            "Heartbeats paused because their token budget for the day was spent.",
            registry=r,
        )

    def _add_liveness_metrics(self, r: CollectorRegistry) -> None:
        """Beat's reconciler: stalled turns, and the alerts it sent about them."""
        self.stalled = Gauge(
            "hbgw_stalled_sessions",
            "Sessions whose running turn has not stamped for long, by verdict (stale, dead).",
            ["verdict"],
            registry=r,
        )
        self.alerts = Counter(
            "hbgw_alerts",
            "Stall alerts for HBGW_ALERT_WEBHOOK, by outcome (sent, failed, dropped: queue full).",
            ["outcome"],
            registry=r,
        )
        self.retention_deleted = Counter(
            "hbgw_retention_deleted",
            "Rows beat's retention deleted, by table (runs, messages; with their deliveries).",
            ["table"],
            registry=r,
        )

    def _add_registry_gauges(self, r: CollectorRegistry) -> None:
        """Who is live: the workers' and the beats' registries, and the clock they are dated by."""
        self.clock_offset = clock_offset_gauge(r)
        self.redis_eviction = redis_eviction_gauge(r)
        self.live_workers = Gauge("hbgw_live_workers", "Workers registered as live.", registry=r)
        self.live_beats = Gauge("hbgw_live_beats", "Beat replicas registered as live.", registry=r)
        self.owned_shards = Gauge(
            "hbgw_beat_owned_shards", "Due-index shards this beat claims.", registry=r
        )


def clock_offset_gauge(r: CollectorRegistry) -> Gauge:
    """How far this host's clock is off the shared one that every process uses (Redis TIME)."""
    return Gauge(
        "hbgw_clock_offset_seconds",
        "The shared clock (Redis TIME) minus this host's clock at the last sample, seconds.",
        registry=r,
    )


def redis_eviction_gauge(r: CollectorRegistry) -> Gauge:
    """1 under the evicting policy HBGW_REDIS_ACCEPT_EVICTION accepted (the label: the policy
    read at start); no series under ``noeviction``. An alert on it: keys may be evicted."""
    return Gauge(
        "hbgw_redis_eviction_accepted",
        "1 when this process runs on a Redis whose maxmemory-policy may evict keys, accepted "
        "by HBGW_REDIS_ACCEPT_EVICTION; labelled with the policy.",
        ["policy"],
        registry=r,
    )


@lru_cache(maxsize=1)
def gateway_metrics() -> GatewayMetrics:
    """This process's metrics (one beat or worker per process in production)."""
    return GatewayMetrics()


def count_delivery(platform: str, outcome: str, n: int = 1) -> None:
    """Count ``n`` deliveries by ``platform`` (the channel that delivered them: a label of
    ``DELIVERY_PLATFORMS``; any other counts as ``other``) that ended ``outcome``."""
    if outcome not in DELIVERY_OUTCOMES:
        raise ValueError(f"delivery outcome must be one of {DELIVERY_OUTCOMES}, not {outcome!r}")
    label = platform if platform in DELIVERY_PLATFORMS else "other"
    if n:
        gateway_metrics().deliveries.labels(label, outcome).inc(n)


def serve_metrics(host: str, port: int, role: str) -> bool:
    """Serve this process's ``/metrics`` on ``host:port`` from a daemon thread; port 0 is off.

    A port already taken stops the process at start (an ``OSError``): a role that runs without
    the metrics its operator configured would leave the dashboard silently blind.
    """
    if port <= 0:
        return False
    start_http_server(port, addr=host, registry=gateway_metrics().registry)
    log.info(
        "%s metrics on http://%s:%d/metrics",
        role,
        host,
        port,
        extra={"action": "metrics.serving"},
    )
    return True
