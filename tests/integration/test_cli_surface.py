"""What `hbgw` shows before it does anything: help, version, error sentences, import weight."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

import pytest
import typer
from support.cli_fixtures import Hbgw, Result

from hbgw.cli import main as cli
from hbgw.core import errors

# -- heartbeat set speaks the /heartbeat grammar ---------------------------------------------


def _error(result: Result) -> str:
    assert result.code == 2, result
    assert result.err.startswith("Error: ") and result.err.count("\n") == 1, result.err
    return result.err.removeprefix("Error: ").strip()


@pytest.mark.parametrize(
    ("options", "slash"),
    [
        (["--tz", "Asia/Tokyo"], "--tz Asia/Tokyo"),
        (["--every", "10s"], "--every 10s"),
        (["--every", "soon"], "--every soon"),
        (["--every", "90"], "--every 90"),
        (["--cron", "0 9 * * *", "--tz", "Mars/Base"], '--cron "0 9 * * *" --tz Mars/Base'),
        (["--cron", "TZ=UTC 0 9 * * *", "--tz", "Asia/Tokyo"], "TZ=UTC 0 9 * * * --tz Asia/Tokyo"),
        (["--cron", "61 * * * *"], '--cron "61 * * * *"'),
        (["--cron", "@midnight"], "@midnight"),
    ],
)
def test_heartbeat_set_errors_are_the_slash_sentences(
    hbgw: Hbgw, options: list[str], slash: str
) -> None:
    sid = hbgw("session", "create", "--platform", "cli", "--chat", "me").out.strip()
    from_cli = _error(hbgw("heartbeat", "set", sid, *options, "check", "CI"))
    from_chat = _error(hbgw("send", sid, f"/heartbeat {slash} check CI"))
    assert from_cli == from_chat


@pytest.mark.parametrize(
    ("options", "needle"),
    [
        (
            ["--every", "10m", "--cron", "@daily"],
            "Give one schedule — --every or --cron, not both.",
        ),
        (["--every", ""], "No interval was given"),
    ],
)
def test_heartbeat_set_rejects_what_the_options_cannot_mean(
    hbgw: Hbgw, options: list[str], needle: str
) -> None:
    sid = hbgw("session", "create", "--platform", "cli", "--chat", "me").out.strip()
    assert needle in _error(hbgw("heartbeat", "set", sid, *options, "check"))


@pytest.mark.parametrize(
    ("options", "slash"),
    [
        (["--every", "90 minutes"], "every 90 minutes"),
        (["--every", "1.5h"], "--every 1.5h"),
        ([], ""),
        (["--cron", "0 9 * * 1-5", "--tz", "asia/tokyo"], '--cron "0 9 * * 1-5" --tz Asia/Tokyo'),
        (["--cron", "@daily"], "@daily"),
    ],
)
def test_heartbeat_set_sets_what_the_slash_command_sets(
    hbgw: Hbgw, options: list[str], slash: str
) -> None:
    sid = hbgw("session", "create", "--platform", "cli", "--chat", "me").out.strip()
    from_cli = hbgw("heartbeat", "set", sid, *options, "check", "CI")
    assert from_cli.code == 0, from_cli.err
    cli_state = json.loads(hbgw("heartbeat", "status", sid, "--json").out)
    from_chat = hbgw("send", sid, f"/heartbeat {slash} check CI")
    assert from_chat.out == from_cli.out
    chat_state = json.loads(hbgw("heartbeat", "status", sid, "--json").out)
    keys = ("interval_seconds", "cron", "timezone", "prompt", "schedule")
    assert {k: cli_state[k] for k in keys} == {k: chat_state[k] for k in keys}


# -- help and version ------------------------------------------------------------------------


def test_help_groups_the_commands_in_a_deliberate_order(hbgw: Hbgw) -> None:
    text = hbgw("--help").out
    # Panel titles (╭─ Run ───) and the first word of each row (│ up   Run everything…).
    shown = re.findall(r"^╭─ (.+?) ─|^│ (\S+) ", text, flags=re.MULTILINE)
    assert [title or name for title, name in shown] == [
        *("Options", "--version", "--help"),
        *("Run", "up", "demo", "worker", "beat", "api", "flower"),
        *("Talk to sessions", "session", "heartbeat", "cron", "send", "chat", "watch"),
        *("Inspect", "runs", "config", "agents"),
        *("Operate", "migrate", "estop", "stamp", "telegram", "discord"),
    ]


@pytest.mark.parametrize(
    ("args", "usage"),
    [
        (["send"], "Usage: hbgw send [OPTIONS] SESSION TEXT…\n"),
        (["heartbeat", "set"], "Usage: hbgw heartbeat set [OPTIONS] SESSION PROMPT…\n"),
        (["session", "show"], "Usage: hbgw session show [OPTIONS] SESSION\n"),
        (["estop"], "Usage: hbgw estop [OPTIONS] on|off\n"),
        ([], "Usage: hbgw [OPTIONS] COMMAND [ARGS]...\n"),
    ],
)
def test_help_shows_plain_argument_names(hbgw: Hbgw, args: list[str], usage: str) -> None:
    result = hbgw(*args, "--help")
    assert result.code == 0
    assert usage in "\n".join(line.strip() for line in result.out.splitlines()) + "\n"
    for odd in ("{", "}", "…...", "<bool>"):
        assert odd not in result.out, result.out


def test_help_of_heartbeat_set_and_worker_names_their_options(hbgw: Hbgw) -> None:
    text = " ".join(hbgw("heartbeat", "set", "--help").out.split())
    for option in ("--every INTERVAL", "--cron EXPR", "--tz ZONE"):
        assert option in text
    worker = " ".join(hbgw("worker", "--help").out.split())
    assert "--concurrency N" in worker and "N Celery threads" in worker
    assert "--turns M" in worker and "HBGW_WORKER_TURNS" in worker


def test_version_is_the_installed_package_version(hbgw: Hbgw) -> None:
    result = hbgw("--version")
    assert (result.code, result.out) == (0, f"hbgw {version('heartbeat-gateway')}\n")


PROBE = """
import sys
from hbgw.cli.main import main
try:
    main(["--help"])
except SystemExit as done:
    assert done.code == 0, done.code
heavy = sorted({name.split(".")[0] for name in sys.modules} & {"celery", "sqlalchemy", "redis"})
print("heavy:", ",".join(heavy))
"""


def test_help_does_not_import_celery_sqlalchemy_or_redis(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", PROBE],
        capture_output=True,
        text=True,
        check=True,
        env={"HBGW_HOME": str(tmp_path), "PATH": "/usr/bin:/bin", "COLUMNS": "100"},
        cwd=tmp_path,
    )
    assert "Usage: hbgw" in done.stdout
    assert done.stdout.rstrip().endswith("heavy:"), done.stdout


# -- every typed error: its exit code and one sentence on stderr -----------------------------


def _subclasses(cls: type[errors.HbgwError]) -> list[type[errors.HbgwError]]:
    found = [cls]
    for sub in cls.__subclasses__():
        found += _subclasses(sub)
    return found


ERRORS = sorted(set(_subclasses(errors.HbgwError)), key=lambda cls: cls.__name__)


@pytest.mark.parametrize("error", ERRORS, ids=[cls.__name__ for cls in ERRORS])
@pytest.mark.parametrize("message", ["The thing went wrong\n  in two lines.", ""])
def test_every_typed_error_exits_with_its_code_and_one_sentence(
    capsys: pytest.CaptureFixture[str], error: type[errors.HbgwError], message: str
) -> None:
    app = typer.Typer(add_completion=False)

    @app.command()
    def fail() -> None:
        raise error(message)

    with pytest.raises(SystemExit) as exit_info:
        cli.run(app, [])
    captured = capsys.readouterr()
    assert exit_info.value.code == error.exit_code
    assert captured.out == ""
    lines = captured.err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: ") and lines[0].endswith("."), lines
    if message:
        assert lines[0] == "Error: The thing went wrong in two lines."


@pytest.mark.parametrize(
    ("variable", "value"), [("HBGW_MIN_INTERVAL", "soon"), ("HBGW_DEFAULT_INTERVAL", "5 jiffies")]
)
def test_a_bad_setting_is_one_sentence_that_names_the_variable(
    hbgw: Hbgw, monkeypatch: pytest.MonkeyPatch, variable: str, value: str
) -> None:
    monkeypatch.setenv(variable, value)
    result = hbgw("heartbeat", "set", "s1", "check")
    assert result.code == 2
    assert result.err.startswith(f"Error: {variable} is not valid") or result.err.startswith(
        f"Error: {variable} is not usable"
    )
    assert result.err.count("\n") == 1


README = Path(__file__).resolve().parents[2] / "README.md"


def _readme_commands() -> list[tuple[list[str], list[str]]]:
    """(command path, options) for every `hbgw …` in the README's command table."""
    found = []
    for row in re.findall(r"^\| (`hbgw .+?) \| ", README.read_text(), flags=re.MULTILINE):
        for spec in re.findall(r"`hbgw ([^`]*)`", row):
            words = spec.replace("\\|", "|").split()
            path: list[str] = []
            for word in words:
                if not re.fullmatch(r"[a-z][a-z|-]*", word):  # register-commands
                    break
                path.append(word)
            options = re.findall(r"--[a-z-]+", spec)
            alternatives = path[-1].split("|") if path else [""]
            found += [([*path[:-1], alt] if alt else [], options) for alt in alternatives]
    return found


def test_the_readme_command_table_matches_the_help(hbgw: Hbgw) -> None:
    documented = _readme_commands()
    groups = {p[0] for p, _ in documented if p and "COMMAND" in hbgw(p[0], "--help").out}
    for path, options in documented:
        # `estop on|off` names an argument's values, not subcommands.
        text = hbgw(*(path if path[:1] and path[0] in groups else path[:1]), "--help").out
        assert all(option in text for option in options), (path, options)
    listed = re.findall(r"^│ (\S+) ", hbgw("--help").out, flags=re.MULTILINE)
    assert {name for name in listed if not name.startswith("-")} <= {
        path[0] for path, _ in documented if path
    }
