"""What a batch admission says of each fire: a forward that never reached the broker is an
``error`` (the fire comes back after the claim lease), not ``forwarded``; with no live owner
it is ``no-owner``. Real Redis and SQL; the failing broker is a real Celery app pointed at a
loopback port nobody listens on."""

from __future__ import annotations

import socket
from pathlib import Path

from support.fire_path import FirePath, fire_path_gateway

from hbgw.celery_app import make_celery
from hbgw.state.dispatch import Dispatcher
from hbgw.state.ownership import rendezvous_owner

SESSIONS = 8


def closed_port() -> int:
    """A loopback port with nothing listening (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_a_forward_the_broker_refused_is_an_error(
    tmp_path: Path, redis_url: str, redis_ns: str
) -> None:
    with fire_path_gateway(tmp_path, redis_url, redis_ns) as (gw, _path):
        dead = make_celery(gw.settings, f"redis://127.0.0.1:{closed_port()}/0")
        path = FirePath(gw, dispatcher=Dispatcher(dead, gw.rt.keys))
        try:
            path.rt.registry.refresh("w2", path.rt.now_ms())
            live = path.rt.registry.live(path.rt.now_ms())
            sids = [gw.session(chat=f"C{i}") for i in range(SESSIONS)]
            for sid in sids:
                gw.due_now(sid)
            theirs = {s for s in sids if rendezvous_owner(s, live) == "w2"}
            assert theirs and len(theirs) < SESSIONS, "both workers own some sessions"
            outcomes = path.runner.accept_fires([(sid, path.due_ms(sid)) for sid in sids])
            path.wait_idle()
        finally:
            path.close()
        by_session = dict(zip(sids, outcomes, strict=True))
        assert {by_session[s] for s in theirs} == {"error"}
        assert {by_session[s] for s in sids if s not in theirs} == {"accepted"}
        # Not forwarded, not run: still in the due index, for the next claim.
        for sid in theirs:
            assert gw.rt.index.due_ms(sid) is not None


def test_a_fire_with_no_live_worker_says_no_owner(
    tmp_path: Path, redis_url: str, redis_ns: str
) -> None:
    with fire_path_gateway(tmp_path, redis_url, redis_ns) as (gw, path):
        sid = gw.session()
        gw.due_now(sid)
        due = path.due_ms(sid)
        path.rt.registry.remove("w1")
        assert path.runner.accept_fires([(sid, due)]) == ["no-owner"]
