"""Issue 20's acceptance: the README's "Using it" block, run as a newcomer would, in a scrubbed
environment — `env -i` but for PATH (the venv's bin, put there by the block's own `.
.venv/bin/activate`), a temporary HOME and working directory, no HBGW_* setting (the embedded
defaults) — with `hbgw chat` driven in a pseudo-terminal. The commands are taken from README.md
by the heading, not copied, so the test fails when the block stops working.

`make install` (the first line's first half) is not run: it needs the network and minutes; the
venv that runs this test is the one it makes, reached as `.venv` from the working directory.
PYTHONPATH names this checkout, so a venv installed from another checkout runs this code.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from support.harness import wait_until
from support.pty_term import CTRL_D, Terminal, in_terminal
from support.up_process import alive, children_of

ROOT = Path(__file__).resolve().parents[2]
INSTALL = "make install && . .venv/bin/activate"
ACTIVATE = ". .venv/bin/activate"


def using_it() -> tuple[list[str], list[str]]:
    """The shell blocks of README.md's "Using it" section: the first terminal's, the second's."""
    text = (ROOT / "README.md").read_text()
    start = text.index("\n## Using it\n")
    section = text[start : text.index("\n## ", start + 1)]
    blocks = re.findall(r"```sh\n(.*?)```", section, flags=re.DOTALL)
    assert len(blocks) >= 2, "README's Using it section lost its two shell blocks"
    assert f"`{ACTIVATE}` there too" in section  # the prose that activates the second terminal
    first, second = ([line for line in b.splitlines() if line.strip()] for b in blocks[:2])
    return first, second


def scrubbed(tmp_path: Path) -> tuple[dict[str, str], Path]:
    """A new user's shell: a fresh HOME and working directory, nothing of the test run's."""
    home, work = tmp_path / "home", tmp_path / "work"
    home.mkdir()
    work.mkdir()
    venv = Path(sys.prefix)
    assert (venv / "bin" / "activate").exists(), "the test must run in the project's venv"
    (work / ".venv").symlink_to(venv)
    env = {
        "PATH": "/usr/bin:/bin",
        "HOME": str(home),
        "LANG": "C.UTF-8",
        "TERM": "xterm",
        "PYTHONPATH": str(ROOT),
    }
    return env, work


@contextmanager
def first_terminal(lines: list[str], env: dict[str, str], work: Path) -> Iterator[Path]:
    """`hbgw up` as the README starts it, until Ready.; then SIGTERM and every child gone."""
    assert lines[0].split("  #")[0].strip() == INSTALL, lines[0]
    assert lines[1].split("#")[0].strip() == "hbgw up", lines[1]
    log = work / "up.out"
    script = f"{ACTIVATE}\nexec {lines[1].split('#')[0].strip()}\n"
    with log.open("w") as out:
        up = subprocess.Popen(
            ["bash", "-c", script],
            env=env,
            cwd=work,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    started: list[int] = []
    try:
        wait_until(lambda: "Ready." in log.read_text() or up.poll() is not None, 90, "Ready.")
        assert up.poll() is None, log.read_text()
        started = children_of(up.pid)
        yield log
    finally:
        up.send_signal(signal.SIGTERM)
        try:
            up.wait(60)
        except subprocess.TimeoutExpired:
            os.killpg(up.pid, signal.SIGKILL)
            up.wait(10)
        wait_until(lambda: not any(alive(pid) for pid in started), 30, "hbgw up's children to exit")


def drive_chat(term: Terminal) -> None:
    term.expect("agent> echo: hello", timeout=60)  # `hbgw send "$sid" "hello"` printed its reply
    term.expect('"status": "active"', timeout=30)  # heartbeat status --json
    term.expect("history ends", timeout=30)  # hbgw chat's banner
    term.expect("you> ")
    term.type("typed in the terminal\n")
    term.expect("agent> echo: typed in the terminal", timeout=60)
    term.type(CTRL_D)
    term.expect("Bye.")


def test_the_readme_using_it_block_works_as_written(tmp_path: Path) -> None:
    first, second = using_it()
    env, work = scrubbed(tmp_path)
    script = work / "second-terminal.sh"
    # Each line as written; `set -e`: a failing line stops the block, as a reader would.
    # The reader's shell is in the checkout (here: the working directory with its `.venv`).
    script.write_text("\n".join(["set -e", f"cd {work}", ACTIVATE, *second]) + "\n")
    with first_terminal(first, env, work) as up_log:
        with in_terminal(["bash", str(script)], env=env) as term:
            try:
                drive_chat(term)
                code = term.wait(60)
            finally:
                _end_group(term)  # `hbgw watch "$sid" &` outlives the script
        shown = term.seen
        assert code == 0, shown
        assert "Traceback" not in shown and "Error:" not in shown, shown
        assert "Owner: local" in shown  # session create says whose it is
        assert "♥ Heartbeat set (every 2m): check the deploy" in shown
        assert "No runs (heartbeat or cron job)" in shown or "fire id" in shown  # hbgw runs
        assert "Traceback" not in up_log.read_text()


def _end_group(term: Terminal) -> None:
    """The script's process group (it leads its own session): the watch left in the background."""
    pgid = term.proc.pid
    try:
        os.killpg(pgid, signal.SIGTERM)
    except ProcessLookupError:
        return

    def gone() -> bool:
        term.proc.poll()  # reap the script itself, or the group never empties
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return True
        return False

    wait_until(gone, 20, "the block's background commands to exit")
