"""Liveness: verdicts from stamp age and the worker registry, `hbgw agents`, `hbgw stamp`."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest
import redis
from support.cli_fixtures import Hbgw

from hbgw.core.clock import to_ms, utcnow
from hbgw.core.errors import BadInput
from hbgw.state.keys import Keys
from hbgw.state.liveness import DEAD, IDLE, STALE, Liveness, Stamp, Thresholds, judge
from hbgw.state.liveness_dir import LivenessDir
from hbgw.state.ownership import WorkerRegistry

NOW = 1_800_000_000_000
LIMITS = Thresholds(300, 900)


def _verdicts(*stamps: Stamp, live: list[str] | None = None) -> dict[str, str]:
    return {v.stamp.session: v.verdict for v in judge(stamps, NOW, LIMITS, live)}


def test_the_verdict_follows_the_age_of_the_last_stamp() -> None:
    ages = {"fresh": 299.999, "stale": 300, "late": 899.9, "dead": 900}
    stamps = [Stamp(n, NOW - int(a * 1000), "thinking", "w1") for n, a in ages.items()]
    assert _verdicts(*stamps) == {"fresh": "alive", "stale": STALE, "late": STALE, "dead": DEAD}


def test_rows_come_oldest_first_and_finished_turns_only_while_recent() -> None:
    rows = judge(
        [
            Stamp("b", NOW - 10_000, "tool:bash", "w1"),
            Stamp("a", NOW - 500_000, "delivering", "w1"),
            Stamp("done", NOW - 20_000, IDLE, "w1"),
            Stamp("long-done", NOW - 1_000_000, IDLE, "w1"),
        ],
        NOW,
        LIMITS,
    )
    assert [(r.stamp.session, r.verdict) for r in rows] == [
        ("a", STALE),
        ("done", IDLE),
        ("b", "alive"),
    ]


def test_a_turn_whose_worker_left_the_registry_is_dead_but_a_hook_is_not() -> None:
    stamps = (
        Stamp("orphan", NOW - 1000, "thinking", "gone"),
        Stamp("owned", NOW - 1000, "thinking", "w1"),
        Stamp("hooked", NOW - 1000, "tool:Bash", "hook", external=True),
        Stamp("finished", NOW - 1000, IDLE, "gone"),
    )
    assert _verdicts(*stamps, live=["w1"]) == {
        "orphan": DEAD,
        "owned": "alive",
        "hooked": "alive",
        "finished": IDLE,
    }


def test_thresholds_in_the_wrong_order_are_refused() -> None:
    with pytest.raises(BadInput, match="shorter than the dead one"):
        Thresholds(900, 300)


@pytest.fixture
def with_redis(monkeypatch: pytest.MonkeyPatch, redis_url: str, redis_ns: str) -> Keys:
    monkeypatch.setenv("HBGW_REDIS_URL", redis_url)
    monkeypatch.setenv("HBGW_NAMESPACE", redis_ns)
    return Keys(redis_ns)


def test_agents_reports_a_stalled_turn_dead_with_its_last_phase(
    hbgw: Hbgw, with_redis: Keys, redis_client: redis.Redis
) -> None:
    now = to_ms(utcnow())
    WorkerRegistry(redis_client, with_redis, ttl_ms=10_000).refresh("w1", now)
    liveness = Liveness(redis_client, with_redis)
    liveness.stamp("s-busy", now, "thinking", "w1")
    assert hbgw("agents").code == 0
    # The turn stops stamping: its last stamp, backdated 16 minutes, is all there is.
    liveness.stamp("s-stuck", now - 960_000, "tool:web_fetch", "w1")
    result = hbgw("agents")
    assert result.code == 1, result
    first, second = result.out.splitlines()[1:]
    assert first.split()[:3] == ["s-stuck", "dead?", "tool:web_fetch"]
    assert second.split()[:3] == ["s-busy", "alive", "thinking"]
    rows = json.loads(hbgw("agents", "--json").out)
    assert [(r["session"], r["verdict"], r["phase"]) for r in rows] == [
        ("s-stuck", "dead?", "tool:web_fetch"),
        ("s-busy", "alive", "thinking"),
    ]
    assert rows[0]["age_seconds"] >= 960
    assert hbgw("agents", "--stale", "1000", "--dead", "2000").code == 0
    refused = hbgw("agents", "--stale", "900", "--dead", "300")
    assert refused.code == 2 and "shorter than the dead one" in refused.err


def test_stamp_goes_to_redis_when_a_deployment_answers(
    hbgw: Hbgw, with_redis: Keys, redis_client: redis.Redis, tmp_path: Path
) -> None:
    result = hbgw("stamp", "--session", "claude-1", "tool:Bash")
    assert result.code == 0, result
    (stamp,) = Liveness(redis_client, with_redis).all()
    assert (stamp.session, stamp.phase, stamp.worker, stamp.external) == (
        "claude-1",
        "tool:Bash",
        "hook",
        True,
    )
    assert not (tmp_path / "liveness").exists()
    # No gateway worker wrote it, so an empty registry does not make it dead.
    assert hbgw("agents").code == 0


def test_stamp_without_redis_writes_a_file_that_agents_dir_reads(
    hbgw: Hbgw, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HBGW_SESSION", "night-run")
    assert hbgw("stamp", "thinking").code == 0
    path = tmp_path / "liveness" / "night-run.json"
    assert json.loads(path.read_text())["phase"] == "thinking"
    assert hbgw("agents").code == 0
    assert hbgw("agents", "--dir", str(tmp_path / "liveness")).out.split()[5:8] == [
        "night-run",
        "alive",
        "thinking",
    ]
    data = json.loads(path.read_text())
    path.write_text(
        json.dumps({**data, "phase": "tool:WebFetch", "at_ms": data["at_ms"] - 7_412_000})
    )
    result = hbgw("agents", "--dir", str(tmp_path / "liveness"), "--json")
    assert result.code == 1
    assert [(r["verdict"], r["phase"]) for r in json.loads(result.out)] == [(DEAD, "tool:WebFetch")]


def test_watch_redraws_until_stopped(hbgw: Hbgw, tmp_path: Path) -> None:
    assert hbgw("stamp", "--dir", str(tmp_path / "d"), "--session", "s", "thinking").code == 0
    result = hbgw("agents", "--dir", str(tmp_path / "d"), "--watch", "0.1", "--count", "3")
    assert result.code == 0
    assert result.out.count("verdict") == 3 and result.out.count(" alive ") == 3


@pytest.mark.parametrize("name", ["../escape", "a/b", ".hidden", "", "x" * 129, "a\\b"])
def test_a_session_name_that_is_no_file_name_is_bad_input(hbgw: Hbgw, name: str) -> None:
    result = hbgw("stamp", "--session", name, "thinking")
    assert result.code == 2
    assert "is not a usable session name" in result.err


def test_a_concurrent_reader_never_sees_a_partial_stamp(tmp_path: Path) -> None:
    store, writes = LivenessDir(tmp_path), 2000
    phase = "tool:" + "x" * 4000  # several writes' worth per file, if a write were not atomic
    store.write(Stamp("s", 0, phase, "hook", external=True))
    done, seen, bad = threading.Event(), [0], []

    def read() -> None:
        while not done.is_set():
            for stamp_file in tmp_path.glob("*.json"):
                try:
                    data = json.loads(stamp_file.read_bytes())
                    assert data["phase"] == phase
                    seen[0] += 1
                except Exception as exc:
                    bad.append(exc)

    reader = threading.Thread(target=read)
    reader.start()
    try:
        for i in range(writes):
            store.write(Stamp("s", i, phase, "hook", external=True))
    finally:
        done.set()
        reader.join()
    assert not bad and seen[0] > 0
    assert [p.name for p in tmp_path.iterdir()] == ["s.json"]  # no temporary file left
    assert store.all()[0].at_ms == writes - 1


@pytest.mark.skipif(shutil.which("jq") is None, reason="the documented hook uses jq")
def test_the_documented_claude_code_hook_stamps_the_tool(tmp_path: Path) -> None:
    doc = (Path(__file__).parents[2] / "docs" / "operations.md").read_text()
    section = doc[doc.index("### Stamps from another agent's hook") :]
    config = json.loads(re.search(r"```json\n(.*?)```", section, re.DOTALL)[1])  # type: ignore[index]
    (hook,) = config["hooks"]["PostToolUse"][0]["hooks"]
    bin_dir = str(Path(sys.executable).parent)  # where the `hbgw` script is installed
    env = {
        "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
        "HBGW_HOME": str(tmp_path),
        "HBGW_SESSION": "nightly-deps",
    }
    event = {"hook_event_name": "PostToolUse", "tool_name": "WebFetch", "tool_input": {}}
    subprocess.run(
        hook["command"], shell=True, input=json.dumps(event), text=True, env=env, check=True
    )
    stamp = json.loads((tmp_path / "liveness" / "nightly-deps.json").read_text())
    assert (stamp["phase"], stamp["worker"]) == ("tool:WebFetch", "hook")
