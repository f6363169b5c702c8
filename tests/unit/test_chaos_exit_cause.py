"""The chaos harness tells why a role exited: the end of its log goes into the report, and the
line that names the error into the check's failure (a CI run shows the cause without the run
directory, which CI does not keep)."""

from __future__ import annotations

from pathlib import Path

from chaos.checks import run_checks
from chaos.cluster import log_tail
from chaos.evidence import Evidence, ProcessExit

T = 1_800_000_000.0


def test_an_exit_is_reported_with_the_line_of_its_log_that_says_why(tmp_path: Path) -> None:
    log = tmp_path / "w2.log"
    log.write_text(
        "INFO consumer connected\n"
        "CRITICAL Unrecoverable error: ResponseError('LOADING')\n"
        "Traceback (most recent call last):\n"
        '  File "x.py", line 1, in <module>\n'
        "redis.exceptions.ResponseError: LOADING Redis is loading the dataset in memory\n"
        "worker: Warm shutdown (MainProcess)\n"
    )
    ev = Evidence()
    ev.exits.append(ProcessExit("w2", 4242, 1, T + 10, log_tail(log)))
    [check] = [c for c in run_checks(ev) if c.name == "no_process_exited"]
    [failure] = check.failures
    assert "ResponseError: LOADING Redis is loading" in failure
    assert log_tail(tmp_path / "absent.log") == []
