"""Redis behind Sentinel (issue 19): a primary, a replica and three sentinels started by the
test; the primary is SIGKILLed under load; Sentinel promotes the replica and every role — the
gateway's own clients and Celery's broker connection — finds it. Checked from the ledger: no
fire twice, no overlapping turn, every accepted message answered."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from subprocess import Popen
from typing import Any

import pytest
from support.harness import Gateway, gateway_settings, wait_until
from support.scenarios import check_gateway, send
from support.sentinel_cluster import SentinelCluster

from hbgw.broker import broker_url
from hbgw.core.clock import utcnow
from hbgw.core.errors import BadInput
from hbgw.gateway.inbound import Queued
from hbgw.procs import spawn_hbgw, stop_all
from hbgw.sessions.states import REACHED_AGENT, RunState
from hbgw.state.connection import connect
from hbgw.state.sentinel import kombu_url, parse

pytestmark = pytest.mark.timeout(300)
SESSIONS = 12


def test_a_sentinel_url_is_read_or_refused_with_a_sentence() -> None:
    where = parse("sentinel://:s3cret@10.0.0.1:26379,10.0.0.2/mymaster/2")
    assert where.sentinels == (("10.0.0.1", 26379), ("10.0.0.2", 26379))
    assert (where.service, where.db, where.password) == ("mymaster", 2, "s3cret")
    url, options = kombu_url("sentinel://:p%40ss@h1:1,h2:2/svc/1")
    assert url == "sentinel://:p%40ss@h1:1/1;sentinel://:p%40ss@h2:2/1"
    assert options == {"master_name": "svc"}
    for bad in ("sentinel://h1:26379", "sentinel://h1:x/svc", "sentinel:///svc"):
        with pytest.raises(BadInput, match="sentinel://") as caught:
            parse(bad)
        assert "s3cret" not in str(caught.value)


def test_the_client_follows_a_failover(sentinel_cluster: SentinelCluster) -> None:
    client = connect(sentinel_cluster.url)
    try:
        client.set("k", "before")
        replica = sentinel_cluster.replica.client()
        with replica:
            wait_until(lambda: replica.get("k") == "before", 10, "replication")
        old = sentinel_cluster.kill_primary()
        sentinel_cluster.wait_failover(old)
        # The pool asks the sentinels again when its connection to the dead primary fails.
        wait_until(lambda: _writes(client), 30, "a write to the promoted replica")
        assert client.get("k") == "before"
        assert client.connection_pool.connection_kwargs["db"] == 0
    finally:
        client.close()


def _writes(client: object) -> bool:
    try:
        return bool(client.set("k2", "after"))  # type: ignore[attr-defined]
    except Exception:
        return False


@contextmanager
def roles(gw: Gateway, tmp_path: Path) -> Iterator[list[Popen[bytes]]]:
    procs: list[Popen[bytes]] = []
    try:
        for i, args in enumerate((["worker", "--name", "w1"], ["beat"])):
            procs.append(spawn_hbgw(args, env=gw.env(), log=tmp_path / f"role{i}.log"))
        yield procs
    finally:
        stop_all(procs, timeout=20)


def test_every_role_follows_a_failover_under_load(
    tmp_path: Path, redis_ns: str, sentinel_cluster: SentinelCluster
) -> None:
    url = sentinel_cluster.url
    settings = gateway_settings(tmp_path, url, redis_ns, agent="echo")
    assert broker_url(settings, url).startswith("sentinel://127.0.0.1:")
    gw = Gateway(settings, url)
    try:
        with roles(gw, tmp_path):
            wait_until(lambda: gw.rt.registry.live(gw.rt.now_ms()), 60, "the worker to register")
            sessions = [gw.session(chat=f"C{i}") for i in range(SESSIONS)]
            for sid in sessions:
                gw.due_now(sid, seconds=1)
            wait_until(lambda: len(_completed(gw)) >= 2 * SESSIONS, 90, "fires before")
            before = send(gw, sessions[0], "sent before the failover")
            old = sentinel_cluster.kill_primary()
            killed = utcnow()
            promoted_in = sentinel_cluster.wait_failover(old)
            after = _send_until_accepted(gw, sessions[1], "sent after the failover")
            wait_until(
                lambda: len([r for r in _completed(gw) if r.reserved_at > killed]) >= SESSIONS,
                120,
                "fires after the failover",
            )
            for queued in (before, after):
                assert isinstance(queued, Queued)
                message_id = queued.message_id
                wait_until(lambda: gw.store.messages.reply_for(message_id), 60, "a reply")  # noqa: B023
        first_after = min(r.reserved_at for r in _completed(gw) if r.reserved_at > killed)
        print(f"promoted in {promoted_in:.1f} s; fires again {first_after - killed} after the kill")
        runs = gw.runs()
        assert len({r.fire_id for r in runs}) == len(runs), "a fire ran twice"
        report = check_gateway(gw, include_index=False)
        assert report.ok, report.to_json()
    finally:
        gw.close()


def _completed(gw: Gateway) -> list[Any]:
    return [r for r in gw.runs() if r.state == RunState.COMPLETED and r.state in REACHED_AGENT]


def _send_until_accepted(gw: Gateway, sid: str, text: str) -> object:
    """The edge answers 503 while Redis has no primary; a client sends again."""

    def attempt() -> object:
        try:
            return send(gw, sid, text)
        except Exception:
            return None

    return wait_until(attempt, 60, "the edge to accept a message again")
