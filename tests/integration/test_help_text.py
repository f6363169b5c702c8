"""Issue 20, item 9's smaller items: `hbgw … --help` in an 80-column terminal (every option's
name whole, no Python type labels such as ``<str>``), `hbgw stamp` saying when the configured
Redis is down, no stars for a password that is not set."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import typer
from support.cli_fixtures import Hbgw
from support.harness import Gateway, wait_until
from support.jobs import add_job, ago, job_runs
from support.tls_redis import free_port

from hbgw.cli.main import app
from hbgw.core.masking import mask_url


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


def test_stamp_says_so_when_the_configured_redis_does_not_answer(
    hbgw: Hbgw, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("HBGW_REDIS_URL", f"redis://:pw-not-shown@127.0.0.1:{free_port()}/0")
    result = hbgw("stamp", "--session", "nightly", "idle")
    assert result.code == 0, result
    assert str(tmp_path / "liveness") in result.out
    assert "did not answer" in result.err and "HBGW_REDIS_URL" in result.err
    assert "pw-not-shown" not in result.err


def test_stamp_into_a_chosen_directory_says_nothing_more(hbgw: Hbgw, tmp_path: Path) -> None:
    assert hbgw("stamp", "--dir", str(tmp_path / "d"), "idle").err == ""


def test_an_empty_password_is_not_starred() -> None:
    assert mask_url("redis://:@127.0.0.1:6379/0") == "redis://:@127.0.0.1:6379/0"
    assert mask_url("redis://u:@h/0") == "redis://u:@h/0"
    assert mask_url("redis://u:p@h/0") == "redis://u:********@h/0"


def test_the_runs_table_lines_up(
    hbgw: Hbgw, gateway: Gateway, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in gateway.env().items():
        monkeypatch.setenv(name, value)
    sid = gateway.session()
    with gateway.worker("w1"):
        for _ in range(2):
            gateway.due_now(sid, seconds=600, prompt="check CI")
            gateway.tick()
            wait_until(lambda: len(gateway.final_runs(sid)) >= 1, 30, "a run")
    header, *rows = hbgw("runs", sid).out.splitlines()
    assert rows
    for column in ("state", "reserved", "started", "tokens in+out", "delivery"):
        at = header.index(column)
        assert all(row[at - 2 : at] == "  " and row[at] != " " for row in rows), (column, rows)


def test_the_cron_runs_table_lines_up(
    hbgw: Hbgw, gateway: Gateway, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in gateway.env().items():
        monkeypatch.setenv(name, value)
    with gateway.worker("w1"):
        fresh = add_job(gateway, "every 2s", set_at=ago(10))  # each run a fresh session
        gateway.tick()
        job_runs(gateway, fresh.id)
    header, *rows = hbgw("cron", "runs", fresh.id).out.splitlines()
    assert rows
    for column in ("state", "session", "reserved", "tokens in+out", "delivery"):
        at = header.index(column)
        assert all(row[at - 2 : at] == "  " and row[at] != " " for row in rows), (column, rows)
