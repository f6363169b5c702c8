"""Fencing and backlog of the worker (issue 7, defects 3 and 4), and the empty heartbeat reply.

On real Redis, SQL and Celery workers. Races are staged with the runner's ``before_start`` seam
and a one-thread executor; a lease running out is observed on a real Redis key, never slept.
"""

from __future__ import annotations

from pathlib import Path

from support.harness import Gateway, gateway_settings

from sessions.states import RunState


def test_empty_heartbeat_reply_is_silent(tmp_path: Path, redis_url: str, redis_ns: str) -> None:
    """Rule 7. Defect: an agent that answered nothing had "" delivered, recorded completed."""
    settings = gateway_settings(tmp_path, redis_url, redis_ns, agent_command="true")
    gw = Gateway(settings, redis_url)
    try:
        with gw.worker("w1"):
            sid = gw.session()
            gw.due_now(sid)
            gw.tick()
            [run] = gw.final_runs(sid)
        assert run.state == RunState.SILENT
        assert gw.deliveries(sid, "send") == []
    finally:
        gw.close()
