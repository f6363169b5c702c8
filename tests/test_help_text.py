"""`hbgw … --help` in an 80-column terminal (issue 20, item 9): every option's name whole, no
Python type labels (``<str>``, ``<int range>``, ``<list[str]>``)."""

from __future__ import annotations

import re
from typing import Any

import pytest
import typer
from support.cli_fixtures import Hbgw

from hbgw.cli.main import app


def _paths(command: Any, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    found = [prefix]
    if hasattr(command, "commands"):  # a group (typer's own copy of click's)
        for name, sub in command.commands.items():
            found += _paths(sub, (*prefix, name))
    return found


def _options(path: tuple[str, ...]) -> list[str]:
    command: Any = typer.main.get_command(app)
    for name in path:
        command = command.commands[name]
    shown = [p for p in command.params if not getattr(p, "hidden", False)]
    return [o for p in shown for o in p.opts if o.startswith("--")]


PATHS = _paths(typer.main.get_command(app))


@pytest.mark.parametrize("path", PATHS, ids=[" ".join(p) or "hbgw" for p in PATHS])
def test_help_has_whole_option_names_and_no_type_labels(
    hbgw: Hbgw, monkeypatch: pytest.MonkeyPatch, path: tuple[str, ...]
) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    text = hbgw(*path, "--help").out
    assert not re.search(r"<(str|int|float|list|path|bool)[^>]*>", text), text
    for option in _options(path):
        assert re.search(rf"{re.escape(option)}(?![\w-])", text), (option, text)
    assert "…" not in "".join(re.findall(r"│ (--\S+)", text)), text
