"""A process whose clock is 20 s ahead: real `hbgw beat` and `hbgw worker` processes, one of
them under libfaketime, over one Redis and one SQLite store.

Every time compared across processes comes from Redis TIME, so a skewed beat still dispatches
its shards and a skewed worker writes no anchor in the future; heartbeats fire on time, and the
skewed process says so once in its log and in ``hbgw_clock_offset_seconds``.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path
from subprocess import Popen

import pytest
from support.harness import Gateway, gateway_settings, wait_until
from support.metrics_reading import free_port, scrape

from hbgw.core.clock import utcnow
from hbgw.procs import spawn_hbgw, stop_all
from hbgw.sessions.states import REACHED_AGENT
from hbgw.state.beat_registry import BeatRegistry, shards_of
from hbgw.state.keys import shard_of

pytestmark = [pytest.mark.timeout(240)]

FAKETIME = Path("/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1")
if not FAKETIME.exists():
    if os.environ.get("CI"):
        raise RuntimeError(f"{FAKETIME} is missing: .ci/run installs the faketime package")
    pytestmark.append(pytest.mark.skip(reason="libfaketime is not installed (apt-get faketime)"))

AHEAD = 20  # seconds the skewed process's clock runs ahead
FIRES = 3  # fires of each 1 s heartbeat that must happen on time
WORKER = ["worker", "--name", "w1", "--concurrency", "4"]
SKEW_LOGGED = "off the shared clock"


def skewed(env: dict[str, str], metrics_port: int) -> dict[str, str]:
    # Monotonic time stays true: the clock serves Redis TIME plus monotonic time elapsed.
    return {
        **env,
        "LD_PRELOAD": str(FAKETIME),
        "FAKETIME": f"+{AHEAD}s",
        "FAKETIME_DONT_FAKE_MONOTONIC": "1",
        "HBGW_METRICS_PORT": str(metrics_port),
    }


Role = tuple[list[str], bool]  # `hbgw` arguments, and whether its clock is ahead


@contextmanager
def started(gw: Gateway, tmp_path: Path, port: int, *roles: Role) -> Iterator[list[Popen[bytes]]]:
    """The processes of ``roles``, logging to procN.log; the skewed one serves /metrics on
    ``port``."""
    procs: list[Popen[bytes]] = []
    try:
        for i, (args, skew) in enumerate(roles):
            env = skewed(gw.env(), port) if skew else gw.env()
            procs.append(spawn_hbgw(args, env=env, log=tmp_path / f"proc{i}.log"))
        yield procs
    finally:
        stop_all(procs, timeout=20)


@pytest.fixture
def gw(tmp_path: Path, redis_url: str, redis_ns: str) -> Iterator[Gateway]:
    settings = gateway_settings(tmp_path, redis_url, redis_ns, agent="echo", due_shards=16)
    gateway = Gateway(settings, redis_url)
    yield gateway
    gateway.close()


def schedule(gw: Gateway, count: int) -> list[str]:
    sessions = [gw.session(chat=f"C{i}") for i in range(count)]
    for sid in sessions:
        gw.due_now(sid, seconds=1)
    return sessions


def anchors_not_in_the_future(gw: Gateway, sessions: list[str]) -> None:
    anchors = {sid: gw.store.heartbeats.get_heartbeat(sid) for sid in sessions}
    runs = gw.runs()
    now = utcnow() + timedelta(seconds=1)  # read after them: anything later is in the future
    for sid, state in anchors.items():
        assert state is not None and state.anchor <= now, (sid, state and state.anchor, now)
    for run in runs:
        assert run.reserved_at <= now, (run.fire_id, run.reserved_at, now)
        assert run.due_at is not None and run.due_at <= now, (run.fire_id, run.due_at, now)


def fired(gw: Gateway, sessions: list[str]) -> bool:
    anchors_not_in_the_future(gw, sessions)  # checked all along: it fails at the first one
    counts = dict.fromkeys(sessions, 0)
    for run in gw.runs():
        if run.state in REACHED_AGENT:
            counts[run.session_id] += 1
    return min(counts.values()) >= FIRES


def assert_on_time_and_not_in_the_future(gw: Gateway, sessions: list[str]) -> None:
    # Each 1 s heartbeat fires FIRES times: a few seconds' work, the rest of the deadline is
    # margin for a loaded machine (libfaketime slows the process it runs in several times).
    # Before the one clock, the skewed beat's heartbeats never fired at all, and the skewed
    # worker's anchors were 20 s in the future from its first fire on.
    wait_until(lambda: fired(gw, sessions), 90, f"{FIRES} fires of every heartbeat")
    anchors_not_in_the_future(gw, sessions)


def assert_the_skew_was_said(port: int, log: Path) -> None:
    url = f"http://127.0.0.1:{port}/metrics"
    samples = wait_until(lambda: scrape(url), 20, "the skewed process's /metrics")
    offset = samples[("hbgw_clock_offset_seconds", ())]
    assert offset == pytest.approx(-AHEAD, abs=1.5)
    assert log.read_text().count(SKEW_LOGGED) == 1


def test_a_beat_20s_ahead_still_dispatches_its_shards(gw: Gateway, tmp_path: Path) -> None:
    beats = BeatRegistry(gw.rt.client, gw.rt.keys, ttl_ms=int(gw.settings.beat_ttl * 1000))
    port = free_port()
    roles: list[Role] = [(WORKER, False), (["beat"], False), (["beat"], True)]
    with started(gw, tmp_path, port, *roles) as procs:
        wait_until(lambda: gw.rt.registry.live(gw.rt.now_ms()) == ["w1"], 60, "the worker")
        live = wait_until(lambda: (b := beats.live(gw.rt.now_ms())) and len(b) == 2 and b, 60)
        skewed_beat = next(b for b in live if f"-{procs[2].pid}-" in b)
        sessions = schedule(gw, 16)  # over 16 shards: both beats own some of them
        own = shards_of(skewed_beat, live, gw.settings.due_shards)
        assert any(shard_of(sid, gw.settings.due_shards) in own for sid in sessions)

        assert_on_time_and_not_in_the_future(gw, sessions)
        # Its entry is dated by Redis, not 20 s ahead: it would go stale if it stopped.
        entry = gw.rt.client.zscore(gw.rt.keys.beats(), skewed_beat)
        assert entry is not None and entry <= gw.rt.now_ms() + 1000
        assert_the_skew_was_said(port, tmp_path / "proc2.log")


def test_a_worker_20s_ahead_writes_no_anchor_in_the_future(gw: Gateway, tmp_path: Path) -> None:
    port = free_port()
    with started(gw, tmp_path, port, (WORKER, True), (["beat"], False)):
        wait_until(lambda: gw.rt.registry.live(gw.rt.now_ms()) == ["w1"], 60, "the worker")
        sessions = schedule(gw, 8)

        assert_on_time_and_not_in_the_future(gw, sessions)
        entry = gw.rt.client.zscore(gw.rt.keys.workers(), "w1")
        assert entry is not None and entry <= gw.rt.now_ms() + 1000
        assert_the_skew_was_said(port, tmp_path / "proc0.log")
