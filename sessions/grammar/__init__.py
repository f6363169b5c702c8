"""The grammar of heartbeat schedules and of the /heartbeat command. Pure: no I/O, no SQL.

Modules, bottom up: ``text`` (wording of errors), ``intervals`` (``10m``, ``every 90 minutes``),
``cron`` (five fields or an @alias, in a timezone), ``schedule`` (either one, and when it fires
next), ``limits`` (what the settings allow), ``slash`` (the /heartbeat command line),
``job_schedule`` and ``cron_slash`` (a cron job's schedule, the /cron command line). Callers
import from this package; the modules import each other only downwards, never lazily. The
package loads each name with its module, when first asked (PEP 562): `hbgw heartbeat status`
reads a schedule without loading the command-line parsers (``slash``, ``cron_slash``).
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from hbgw.sessions.grammar.cron import CronSchedule, cron_next, parse_cron, parse_timezone
    from hbgw.sessions.grammar.cron_slash import is_cron_command
    from hbgw.sessions.grammar.intervals import IntervalSchedule, format_interval, parse_interval
    from hbgw.sessions.grammar.limits import GrammarLimits, limits_from_settings
    from hbgw.sessions.grammar.schedule import Schedule, next_fire
    from hbgw.sessions.grammar.slash import (
        Clear,
        Command,
        Pause,
        Resume,
        SetHeartbeat,
        ShowHelp,
        ShowStatus,
        check_prompt,
        help_text,
        is_heartbeat_command,
        option_schedule,
        parse_command,
    )

__all__ = [
    "Clear",
    "Command",
    "CronSchedule",
    "GrammarLimits",
    "IntervalSchedule",
    "Pause",
    "Resume",
    "Schedule",
    "SetHeartbeat",
    "ShowHelp",
    "ShowStatus",
    "check_prompt",
    "cron_next",
    "format_interval",
    "help_text",
    "is_cron_command",
    "is_heartbeat_command",
    "limits_from_settings",
    "next_fire",
    "option_schedule",
    "parse_command",
    "parse_cron",
    "parse_interval",
    "parse_timezone",
]

_HOMES = {
    "CronSchedule": "cron",
    "cron_next": "cron",
    "parse_cron": "cron",
    "parse_timezone": "cron",
    "is_cron_command": "cron_slash",
    "IntervalSchedule": "intervals",
    "format_interval": "intervals",
    "parse_interval": "intervals",
    "GrammarLimits": "limits",
    "limits_from_settings": "limits",
    "Schedule": "schedule",
    "next_fire": "schedule",
    "Clear": "slash",
    "Command": "slash",
    "Pause": "slash",
    "Resume": "slash",
    "SetHeartbeat": "slash",
    "ShowHelp": "slash",
    "ShowStatus": "slash",
    "check_prompt": "slash",
    "help_text": "slash",
    "is_heartbeat_command": "slash",
    "option_schedule": "slash",
    "parse_command": "slash",
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(f"{__name__}.{home}"), name)
    globals()[name] = value
    return value
