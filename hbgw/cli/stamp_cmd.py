"""`hbgw stamp`'s work, without Typer: a coding agent's hook runs it on every tool call, so the
hook's path (``hbgw.cli.fast``) reaches it without building the whole command tree, and
``live_cmd`` gives it its options and help. The stamp is the CLI's one quick path: it reads its
settings without pydantic when it can (``core.settings_quick``) and asks the deployment's Redis
through the quick client (``state.resp_quick``) when that reads the URL, so a stamp imports
neither pydantic nor redis-py. ``redis_now`` (redis-py, ``Settings``) serves `hbgw agents`.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from hbgw.cli.common import err, out, settings

if TYPE_CHECKING:
    import redis

    from hbgw.core.settings import Settings
    from hbgw.core.settings_quick import QuickSettings
    from hbgw.state.keys import Keys
    from hbgw.state.liveness import Stamp


def stamp_settings() -> QuickSettings | Settings:
    """The stamp's settings, read without pydantic when the environment is one that reader knows
    (``core.settings_quick``), else ``Settings``: the same values either way, and pydantic's
    refusal when there is one."""
    from hbgw.core.settings_quick import quick_settings

    return quick_settings(os.environ) or settings()


@contextmanager
def redis_now() -> Iterator[tuple[redis.Redis, Keys, int] | None]:
    """A deployment's Redis when one answers, its keys, and the time now by Redis' clock (ms):
    stamps are compared with the workers' ones, all dated by Redis TIME
    (``hbgw/state/shared_clock.py``)."""
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
    if directory is None and _stamp_redis(record):
        out(f"Stamped {name}: {record.phase} (Redis namespace {stamp_settings().namespace}).")
        return
    path = LivenessDir(directory or stamp_settings().effective_liveness_dir).write(record)
    out(f"Stamped {name}: {record.phase} ({path}).")
    if directory is not None:
        return  # asked for: no settings read (pydantic's import alone is most of a stamp)
    configured = stamp_settings().redis_url
    if configured:
        from hbgw.core.masking import mask_url

        err(
            f"Note: the configured Redis ({mask_url(configured)}, HBGW_REDIS_URL) did not "
            "answer, so the stamp went into the stamp directory instead."
        )


def _stamp_redis(record: Stamp) -> bool:
    """``record`` into the deployment's Redis, dated by its clock; False when none answers (or
    the quick client lost it half way: the stamp directory gets it then)."""
    from hbgw.cli.gateway_ctx import ask, state_redis
    from hbgw.state.keys import Keys
    from hbgw.state.liveness import stamp_command
    from hbgw.state.resp_quick import QuickRedisError
    from hbgw.state.shared_clock import redis_seconds

    s = stamp_settings()
    with state_redis(s) as client:
        if client is None:
            return False
        try:
            at_ms = int(redis_seconds(client) * 1000)
            ask(client, [stamp_command(Keys(s.namespace), replace(record, at_ms=at_ms))])
        except (OSError, QuickRedisError):
            return False
        return True
