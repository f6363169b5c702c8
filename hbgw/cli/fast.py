"""The `hbgw` entry point: the calls scripts and hooks make over and over are answered without
Typer and the command tree (their import alone took longer than the work), everything else by
``hbgw.cli.main``:

- `hbgw stamp PHASE [--session S] [--worker W] [--dir PATH]`, what a coding agent's hook runs
  on every tool call (``stamp_cmd``);
- `hbgw heartbeat status SESSION [--json]`, what scripts poll (``heartbeat_status``).

Only a call these parsers read completely takes the short path; anything else (``--help``, a
missing argument, an unknown option) goes to the full command, so help and usage errors are
Typer's, word for word. Both paths run the same function for the work. tests/test_cli_start.py
checks they do the same and which modules the short one loads.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

from hbgw.core.errors import HbgwError


class _NotOurs(Exception):
    """The short path does not read this call; the full command will."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        raise _NotOurs(message)


def _parser(prog: str) -> _Parser:
    return _Parser(prog=prog, add_help=False, allow_abbrev=False, exit_on_error=False)


def _stamp_parser() -> _Parser:
    parser = _parser("hbgw stamp")
    parser.add_argument("phase")
    parser.add_argument("--session")
    parser.add_argument("--worker", default="hook")
    parser.add_argument("--dir", type=Path)
    return parser


def _status_parser() -> _Parser:
    parser = _parser("hbgw heartbeat status")
    parser.add_argument("session_id")
    parser.add_argument("--json", dest="as_json", action="store_true")
    return parser


SHORT: dict[tuple[str, ...], Callable[[], _Parser]] = {
    ("stamp",): _stamp_parser,
    ("heartbeat", "status"): _status_parser,
}


def short_args(argv: list[str]) -> tuple[tuple[str, ...], argparse.Namespace] | None:
    """The command and its options when ``argv`` is a plain call of one of ``SHORT``, else
    None."""
    if any(a in ("--help", "-h", "--") for a in argv):
        return None
    for command, parser in SHORT.items():
        if tuple(argv[: len(command)]) == command:
            try:
                return command, parser().parse_args(argv[len(command) :])
            except (_NotOurs, argparse.ArgumentError):
                return None
    return None


def stamp_args(argv: list[str]) -> argparse.Namespace | None:
    """The stamp's options when ``argv`` is a plain `stamp` call, else None."""
    found = short_args(argv)
    return found[1] if found is not None and found[0] == ("stamp",) else None


def _run(command: tuple[str, ...], args: argparse.Namespace) -> None:
    if command == ("stamp",):
        from hbgw.cli.stamp_cmd import write_stamp

        write_stamp(args.phase, args.session, args.worker, args.dir)
    else:
        from hbgw.cli.heartbeat_status import print_status

        print_status(args.session_id, args.as_json)


def main() -> None:
    found = short_args(sys.argv[1:])
    if found is None:
        from hbgw.cli.main import main as full

        full()
        return
    from hbgw.cli.common import err, sentence

    try:
        _run(*found)
    except HbgwError as exc:
        err(f"Error: {sentence(exc)}")
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        sys.exit(130)
