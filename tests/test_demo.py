"""`hbgw demo --json`: the whole contract, self-driven, ends with invariants that hold."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(200)]


def test_demo_summary_shows_every_behaviour(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HBGW_")}
    env["TMPDIR"] = str(tmp_path)  # where the demo makes its temporary home
    done = subprocess.run(
        [sys.executable, "-m", "hbgw", "demo", "--duration", "25", "--json"],
        env=env,
        capture_output=True,
        text=True,
        timeout=150,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    summary = json.loads(done.stdout)
    assert summary["invariants_ok"] is True, summary
    for key in ("fires", "deferred_until_idle", "refunds", "silent", "delivered"):
        assert summary[key] > 0, (key, summary)
    assert summary["duplicate_fires"] == 0
    assert summary["overlapping_turns"] == 0
    assert list(tmp_path.iterdir()) == []  # its temporary home is removed
