"""The `hbgw` entry point: `hbgw stamp PHASE [--session S] [--worker W] [--dir PATH]`, what a
coding agent's hook runs on every tool call, is answered without Typer and the command tree
(their import alone took longer than the stamp); every other call goes to ``hbgw.cli.main``.

Only a stamp call this parser reads completely takes the short path; anything else (``--help``,
a missing argument, an unknown option) goes to the full command, so help and usage errors are
Typer's, word for word. Both paths run the same function (``stamp_cmd.write_stamp``).
tests/integration/test_cli_start.py checks they say the same and which modules the short one loads.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from hbgw.core.errors import HbgwError


class _NotOurs(Exception):
    """The short path does not read this call; the full command will."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        raise _NotOurs(message)


def _stamp_parser() -> _Parser:
    parser = _Parser(prog="hbgw stamp", add_help=False, allow_abbrev=False, exit_on_error=False)
    parser.add_argument("phase")
    parser.add_argument("--session")
    parser.add_argument("--worker", default="hook")
    parser.add_argument("--dir", type=Path)
    return parser


def stamp_args(argv: list[str]) -> argparse.Namespace | None:
    """The stamp's options when ``argv`` is a plain `stamp` call, else None."""
    if argv[:1] != ["stamp"] or any(a in ("--help", "-h", "--") for a in argv):
        return None
    try:
        return _stamp_parser().parse_args(argv[1:])
    except (_NotOurs, argparse.ArgumentError):
        return None


def main() -> None:
    args = stamp_args(sys.argv[1:])
    if args is None:
        import gc

        from hbgw.cli.main import main as full

        try:
            full()
        finally:
            # The interpreter's last collection at exit walks every object the imports made
            # (Celery, SQLAlchemy, pydantic): 0.5-1 s of CPU on a loaded machine after beat, a
            # worker or the API has finished its shutdown (a supervisor's stop, `hbgw up`'s
            # Ctrl-C wait for it). Nothing needs it: logs are flushed by logging's exit hook and
            # files are closed by their owners. Frozen objects are left to the process's end.
            gc.freeze()
        return
    from hbgw.cli.common import err, sentence
    from hbgw.cli.stamp_cmd import write_stamp

    try:
        write_stamp(args.phase, args.session, args.worker, args.dir)
    except HbgwError as exc:
        err(f"Error: {sentence(exc)}")
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        sys.exit(130)
