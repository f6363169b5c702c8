"""`hbgw stamp`'s work, without Typer: a coding agent's hook runs it on every tool call, so the
hook's path (``hbgw.cli.fast``) reaches it without building the whole command tree, and
``live_cmd`` gives it its options and help. Redis' client is imported only when one is asked.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from hbgw.cli.common import err, out, settings

if TYPE_CHECKING:
    import redis

    from hbgw.state.keys import Keys


@contextmanager
def redis_now() -> Iterator[tuple[redis.Redis, Keys, int] | None]:
    """A deployment's Redis when one answers, its keys, and the time now by Redis' clock (ms):
    stamps are compared with the workers' ones, all dated by Redis TIME
    (``state/shared_clock.py``)."""
    from hbgw.cli.gateway_ctx import reachable_redis
    from hbgw.state.keys import Keys
    from hbgw.state.shared_clock import redis_seconds

    s = settings()
    client = reachable_redis(s)
    if client is None:
        yield None
        return
    try:
        yield client, Keys(s.namespace), int(redis_seconds(client) * 1000)
    finally:
        client.close()


def write_stamp(phase: str, session: str | None, worker: str, directory: Path | None) -> None:
    """Into Redis when a deployment answers (unless ``directory``), else the stamp directory."""
    from hbgw.core.clock import to_ms, utcnow
    from hbgw.state.liveness import Stamp
    from hbgw.state.liveness_dir import LivenessDir, check_phase, check_session_name

    if session is None:
        session = os.environ.get("HBGW_SESSION") or "default"
    name = check_session_name(session)
    record = Stamp(name, to_ms(utcnow()), check_phase(phase), worker, external=True)
    if directory is None:
        with redis_now() as found:
            if found is not None:
                from hbgw.state.liveness import Liveness

                Liveness(found[0], found[1]).stamp(
                    name, found[2], record.phase, worker, external=True
                )
                out(f"Stamped {name}: {record.phase} (Redis namespace {settings().namespace}).")
                return
    path = LivenessDir(directory or settings().effective_liveness_dir).write(record)
    out(f"Stamped {name}: {record.phase} ({path}).")
    if directory is not None:
        return  # asked for: no settings read (pydantic's import alone is most of a stamp)
    configured = settings().redis_url
    if configured:
        from hbgw.core.settings import mask_url

        err(
            f"Note: the configured Redis ({mask_url(configured)}, HBGW_REDIS_URL) did not "
            "answer, so the stamp went into the stamp directory instead."
        )
