"""Issue 20, item 13: the built wheel installs one import name, ``hbgw``, without the chaos
harness and the benchmarks, and `pip install` of it into a clean venv runs `hbgw demo`, whose
summary shows every behaviour of the contract with invariants that hold."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

pytestmark = pytest.mark.timeout(600)

ROOT = Path(__file__).resolve().parents[2]


def _run(args: list[str], **kwargs: object) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(args, capture_output=True, text=True, check=False, **kwargs)  # type: ignore[call-overload]
    assert done.returncode == 0, f"{args}: {done.stderr[-3000:]}"
    return done  # type: ignore[no-any-return]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    _run(
        [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "-w", str(out), str(ROOT)],
        timeout=300,
    )
    (built,) = out.glob("heartbeat_gateway-*.whl")
    return built


def test_the_wheel_holds_one_import_name_and_no_harness(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    tops = {n.split("/")[0] for n in names if not n.split("/")[0].endswith(".dist-info")}
    assert tops == {"hbgw"}
    for layer in ("core", "sessions", "state", "beat", "workers", "gateway"):
        assert f"hbgw/{layer}/__init__.py" in names
    assert "hbgw/state/lua/claim_due.lua" in names  # package data follows the links
    assert "hbgw/sessions/migrations/versions/0001_initial.py" in names
    assert not [n for n in names if n.startswith(("chaos/", "bench/", "hbgw/chaos", "hbgw/bench"))]


def test_a_clean_venv_with_the_wheel_runs_the_demo(wheel: Path, tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    # No pip of its own (ensurepip took about 7 s): this environment's pip installs into it
    # (`--python`), and byte-compiles nothing up front (half of the install's time, mostly for
    # modules the demo never imports; Python compiles what it imports).
    _run([sys.executable, "-m", "venv", "--without-pip", str(venv)], timeout=120)
    pip = [sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python")]
    pip += ["install", "--quiet", "--no-compile"]
    # Not the tests' PYTHONPATH: the repository on the path (its egg-info from the build above)
    # would make pip think the project is installed already.
    clean = {k: v for k, v in os.environ.items() if k != "PYTHONPATH" and not k.startswith("HBGW_")}
    _run([*pip, "-c", str(ROOT / "requirements.lock"), str(wheel)], env=clean, timeout=400)
    home, tmp = tmp_path / "home", tmp_path / "tmp"
    home.mkdir()
    tmp.mkdir()
    env = {"PATH": f"{venv / 'bin'}:/usr/bin:/bin", "HOME": str(home), "TMPDIR": str(tmp)}
    version = _run([str(venv / "bin" / "hbgw"), "--version"], env=env, cwd=home, timeout=60)
    assert version.stdout.startswith("hbgw ")
    done = _run(
        [str(venv / "bin" / "hbgw"), "demo", "--duration", "25", "--json"],
        env=env,
        cwd=home,  # not the repository: nothing but the wheel can be imported
        timeout=200,
    )
    # The demo drives the whole contract itself (this was tests/test_demo.py, run from the
    # repository; the installed wheel runs the same code).
    summary = json.loads(done.stdout)
    assert summary["invariants_ok"] is True, summary
    for key in ("fires", "deferred_until_idle", "refunds", "silent", "delivered"):
        assert summary[key] > 0, (key, summary)
    assert summary["duplicate_fires"] == 0
    assert summary["overlapping_turns"] == 0
    assert list(tmp.iterdir()) == []  # its temporary home (under TMPDIR) is removed
