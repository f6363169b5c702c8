"""The `hbgw` fixture: the command line run in-process, as a user would type it."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import pytest

from hbgw.cli.main import main
from hbgw.core.settings import get_settings


@dataclass
class Result:
    code: int
    out: str
    err: str


class Hbgw(Protocol):
    """Runs `hbgw ARGS` in-process and returns its exit code, stdout and stderr."""

    def __call__(self, *args: str) -> Result: ...


@pytest.fixture
def hbgw(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> Iterator[Hbgw]:
    monkeypatch.setenv("HBGW_HOME", str(tmp_path))
    # Wide enough that rich never wraps a line of help in the middle of a phrase.
    monkeypatch.setenv("COLUMNS", "160")
    monkeypatch.setenv("NO_COLOR", "1")

    def run(*args: str) -> Result:
        get_settings.cache_clear()
        with pytest.raises(SystemExit) as exit_info:
            main(list(args))
        captured = capsys.readouterr()
        code = exit_info.value.code
        return Result(code if isinstance(code, int) else 1, captured.out, captured.err)

    yield run
    get_settings.cache_clear()
