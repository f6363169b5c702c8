"""What every turn touches beside the agent, the channel and its own store parts.

The turn runner (``workers/runner.py``) builds this once from the ``Runtime`` and hands it to
``TurnIO``, which the turn kinds share: the heartbeat part (a route refused for good pauses
it; the agent's heartbeat tools read and change it), the due index with its settle rule, the
gate (the tools' emergency-stop read), the liveness stamps, the key names (a finished turn
wakes the session's event streams), the shared clock, this worker's name, the delivery retry
policy and what the heartbeat tools need of the settings. No SQL part but the heartbeat's, no
Redis client, no worker registry: a turn reaches nothing else by accident.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import redis

from hbgw.core.clock import Clock, to_ms
from hbgw.core.settings import Settings
from hbgw.sessions.grammar import GrammarLimits
from hbgw.sessions.store import Heartbeats
from hbgw.state.due_settle import DueSettle
from hbgw.state.keys import Keys
from hbgw.state.liveness import Liveness
from hbgw.state.turn_gate import TurnGate


@dataclass(frozen=True)
class RetryPolicy:
    """HBGW_DELIVERY_RETRIES, HBGW_DELIVERY_BACKOFF and HBGW_DELIVERY_BACKOFF_MAX."""

    retries: int
    backoff: float
    backoff_max: float

    @classmethod
    def of(cls, settings: Settings) -> RetryPolicy:
        return cls(
            settings.delivery_retries, settings.delivery_backoff, settings.delivery_backoff_max
        )


@dataclass(frozen=True)
class TurnParts:
    heartbeats: Heartbeats
    due: DueSettle
    gate: TurnGate
    liveness: Liveness
    keys: Keys
    clock: Clock
    worker: str
    retries: RetryPolicy
    # Read at each change, as a typed /heartbeat reads them (``limits_from_settings``).
    limits: Callable[[], GrammarLimits]
    heartbeat_write: bool  # HBGW_AGENT_HEARTBEAT_WRITE

    def now_ms(self) -> int:
        return to_ms(self.clock())

    def stamp(
        self,
        session_id: str,
        at_ms: int,
        phase: str,
        *,
        pipe: redis.client.Pipeline | None = None,
        missing_only: bool = False,
    ) -> None:
        """The session's liveness stamp, as this worker (``pipe``: queued there;
        ``missing_only``: only where Redis has none, ``Liveness.stamp``)."""
        self.liveness.stamp(
            session_id, at_ms, phase, self.worker, pipe=pipe, missing_only=missing_only
        )
