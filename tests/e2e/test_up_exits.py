"""`hbgw up` and a role that cannot run (issue 20, item 3): what would stop a worker at start
stops `up` before anything starts, with the worker's own sentence; a child that exits later is
named in the terminal with its last sentence, not only "exited with 2"."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from support.up_process import user_env

from hbgw.core.errors import HbgwError
from hbgw.core.settings import Settings
from hbgw.up import Stack, last_words, preflight, wait_forever


def test_a_worker_setting_that_cannot_work_stops_up_before_anything_starts(
    tmp_path: Path,
) -> None:
    env = user_env(tmp_path / "home", HBGW_AGENT="openai", HBGW_NAMESPACE="upexit")
    done = subprocess.run(
        [sys.executable, "-m", "hbgw", "up"], env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 2, done.stdout + done.stderr
    assert "HBGW_AGENT=openai needs HBGW_OPENAI_BASE_URL" in done.stderr
    assert "Ready." not in done.stdout
    assert not (tmp_path / "home" / "logs").exists()  # no role was started


def test_preflight_names_a_platform_without_its_settings(tmp_path: Path) -> None:
    with pytest.raises(HbgwError, match="HBGW_PLATFORMS names discord"):
        preflight(Settings(home=tmp_path, platforms="discord,cli"))


def test_a_child_that_exits_is_named_with_its_last_sentence(tmp_path: Path) -> None:
    log = tmp_path / "w1.log"
    script = (
        "import sys; print('starting'); print('Error: the model refused the key.'); sys.exit(2)"
    )
    with log.open("w") as out:
        child = subprocess.Popen([sys.executable, "-c", script], stdout=out)
    child.wait(30)
    stack = Stack(Settings(home=tmp_path), "redis://127.0.0.1:1/0", {}, tmp_path, {"w1": child})
    with pytest.raises(SystemExit) as stopped:
        wait_forever(stack)
    said = str(stopped.value)
    assert said.startswith("w1 exited with 2; stopping everything.")
    assert "Error: the model refused the key." in said and str(log) in said


def test_last_words_prefers_the_error_sentence_over_a_traceback(tmp_path: Path) -> None:
    log = tmp_path / "beat.log"
    log.write_text("Traceback (most recent call last):\nError: no Redis.\n  at the end\n")
    assert last_words(log) == "Error: no Redis."
    assert last_words(tmp_path / "missing.log") == ""
    (tmp_path / "quiet.log").write_text("only line\n")
    assert last_words(tmp_path / "quiet.log") == "only line"
