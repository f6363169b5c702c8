"""A restorer built like beat's, over any store: for tests that read through a failing one or a
counting one, or that set their own page size."""

from __future__ import annotations

from hbgw.beat.core import RESTORE_STEP_LEASE_MS
from hbgw.beat.restore import RestoreConfig, Restorer
from hbgw.sessions.store import Store
from hbgw.state.restore_sweep import RestoreSweep
from hbgw.state.runtime import Runtime


def make_restorer(
    rt: Runtime, *, store: Store | None = None, page: int = 1000, slack_ms: int = 0
) -> Restorer:
    store = store or rt.store
    return Restorer(
        store.restore,
        store.jobs,
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
