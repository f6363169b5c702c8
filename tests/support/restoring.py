"""A restorer built like beat's, over any store: for tests that read through a failing one or a
counting one, or that set their own page size."""

from __future__ import annotations

from beat.core import RESTORE_STEP_LEASE_MS
from beat.restore import RestoreConfig, Restorer
from sessions.store import Store
from state.restore_sweep import RestoreSweep
from state.runtime import Runtime


def make_restorer(
    rt: Runtime, *, store: Store | None = None, page: int = 1000, slack_ms: int = 0
) -> Restorer:
    return Restorer(
        store or rt.store,
        rt.index,
        rt.gate,
        RestoreSweep(rt.client, rt.keys),
        RestoreConfig(
            page=page,
            interval_ms=int(rt.settings.restore_interval * 1000),
            slack_ms=slack_ms,
            lease_ms=RESTORE_STEP_LEASE_MS,
        ),
    )
