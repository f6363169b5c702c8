"""Smoke tests of the beat benchmarks (claim, tick, memory, redbeat) at tiny sizes.

Nothing is timed or compared here: each benchmark's core runs once against a private Redis (they
flush it) so that it cannot rot. The numbers come from ``python -m bench``.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from support import fires
from support.private_redis import PrivateRedis, running_redis

from bench import claim, memory, plots, redbeat_setup, tick
from bench.beat_rig import BeatRig, beat_rig, rig_settings, session_ids
from bench.fleet import build_fleet
from bench.runner import write_result
from hbgw.core.clock import to_ms
from hbgw.state.turn_gate import Began, TurnEnded

SIZE = 200


@pytest.fixture
def server(tmp_path: Path) -> Iterator[PrivateRedis]:
    with running_redis(tmp_path / "redis") as private:
        yield private


@pytest.fixture
def rig(tmp_path: Path, server: PrivateRedis) -> Iterator[BeatRig]:
    with beat_rig(rig_settings(tmp_path, server.url, "tb")) as built:
        yield built


@pytest.fixture
def redbeat_app(server: PrivateRedis) -> Iterator[Any]:
    app = redbeat_setup.make_app(server.url, "rb")
    try:
        yield app
    finally:
        app.close()


def test_claim_publishes_every_due_fire_as_one_message_per_worker(rig: BeatRig) -> None:
    result = claim.measure_ours(rig, SIZE, reps=2)
    assert [r["messages"] for r in result["reps"]] == [4.0, 4.0]
    assert result["fires_per_s"]["median"] > 0
    assert rig.queued_messages(["w1", "w2", "w3", "w4"]) == 0  # purged after each repetition


def test_redbeat_sends_every_due_entry(redbeat_app: Any) -> None:
    result = redbeat_setup.measure_sends(redbeat_app, 20, budget_s=60)
    assert result["complete"] and result["sent"] == 20
    assert redbeat_setup.clear(redbeat_app) > 0


def test_redbeat_populate_writes_what_entry_save_writes(redbeat_app: Any) -> None:
    client = redbeat_setup._plain_client(redbeat_app)
    conf = redbeat_app.redbeat_conf
    name = redbeat_setup.populate(redbeat_app, 1, 60, due_now=True)[0]
    bulk = client.hgetall(conf.key_prefix + name)
    redbeat_setup.clear(redbeat_app)
    redbeat_setup._entry(redbeat_app, name, 60, None).save()
    assert client.hgetall(conf.key_prefix + name) == bulk
    assert client.zcard(conf.schedule_key) == 1
    client.close()


def test_tick_runs_with_and_without_restore_over_a_sql_fleet(rig: BeatRig) -> None:
    result = tick.measure_size(rig, SIZE, restore_budget_s=30, skip_restore=False, reps=2)
    assert len(result["without_restore_s"]["reps"]) == 2
    assert len(result["with_restore_s"]["reps"]) == 2


def test_the_fleet_in_sql_is_what_the_store_restores(rig: BeatRig) -> None:
    fleet = build_fleet(rig, SIZE, 10, datetime.now(UTC))
    restorable = {e.session_id: to_ms(e.next_due_at) for e in fires.restorable(rig.rt.store)}
    assert restorable == rig.rt.index.due_many(session_ids(SIZE))
    assert all(restorable[sid] <= fleet.due_ms for sid in fleet.due_ids)


def test_memory_counts_the_keys_a_finished_turn_leaves(rig: BeatRig) -> None:
    assert memory.ours_bytes(rig, SIZE) > 0
    seeded = memory.session_key_types(rig.client, rig, session_ids(1)[0])
    # A session that ran a real turn and went idle, with its next due time written.
    sid, gate = "s-turned", rig.rt.gate
    assert isinstance(gate.try_begin_fire(sid, f"{sid}:1", "tok", 5000), Began)
    assert isinstance(gate.next_step(sid, "tok", 5000)[0], TurnEnded)
    rig.rt.index.schedule(sid, rig.rt.now_ms() + 60_000)
    turned = memory.session_key_types(rig.client, rig, sid)

    def shape(found: dict[str, str]) -> list[tuple[str, str]]:
        return sorted(
            ("due" if kind.startswith("zset") else key.rsplit(":", 1)[-1], kind)
            for key, kind in found.items()
        )

    assert shape(turned) == shape(seeded)
    assert {kind for kind in seeded.values()} == {"string", "zset (member)"}


def test_redbeat_memory_counts_one_hash_per_entry(redbeat_app: Any, server: PrivateRedis) -> None:
    client = server.client()
    assert memory.redbeat_bytes(redbeat_app, client, SIZE) > 0
    types = redbeat_setup.entry_key_types(redbeat_app, redbeat_setup.entry_name(0))
    assert sorted(types.values()) == ["hash", "zset"]
    client.close()


def test_plots_draw_what_is_there_and_skip_what_is_not(tmp_path: Path) -> None:
    results, images = tmp_path / "results", tmp_path / "img"
    claim_result = {
        "ours": [{"scheduled": 200, "fires_per_s": {"median": 5e4, "min": 4e4, "max": 6e4}}],
        "redbeat": [{"scheduled": 20, "sends_per_s": 500.0}],
    }
    write_result(
        results, "claim", {"profile": "quick", "started_at": "2026", "result": claim_result}
    )
    written = plots.write_all(results, images)
    assert written == [images / "bench-claim.png"]
    assert (images / "bench-claim.png").stat().st_size > 0
