"""How `hbgw … --help` reads: plain argument names, no type label on a flag, a set order.

Typer's own usage line wraps required arguments in braces and appends "..." even to a name
that already says it repeats (``{TEXT…}...``), and labels every flag ``<bool>``. These classes
keep the usage line to the metavars as written, leave a flag's type column empty and name an
option's value instead of its Python type.
"""

from __future__ import annotations

from typing import Any, ClassVar

from typer.core import TyperCommand, TyperGroup

# The panels of `hbgw --help`, top to bottom (typer lists panels by first appearance).
RUN = "Run"
TALK = "Talk to sessions"
INSPECT = "Inspect"
OPERATE = "Operate"


def _argument_label(param: Any) -> str:
    label = param.metavar or param.name.upper()
    if param.metavar is None and param.nargs != 1:
        label += "…"
    return label if param.required else f"[{label}]"


def _usage_pieces(command: TyperCommand | TyperGroup, ctx: Any) -> list[str]:
    pieces = [command.options_metavar] if command.options_metavar else []
    for param in command.get_params(ctx):
        if param.param_type_name == "argument":
            pieces.append(_argument_label(param))
    return pieces


def _no_type(ctx: Any) -> None:
    return None


def _no_range() -> None:
    return None


def _range_in_help(param: Any) -> None:
    """A number's bounds as words at the end of its help (``Range: 1–65535.``), not in the type
    column, whose width cut the longest option name off in an 80-column terminal."""
    if getattr(param, "_range_moved", False):
        return  # get_params runs more than once per help page
    param._range_moved = True
    low, high = getattr(param, "min", None), getattr(param, "max", None)
    if low is None and high is None:
        return
    if low is not None and high is not None:
        bounds = f"{low}–{high}"
    else:
        bounds = f"at least {low}" if low is not None else f"at most {high}"
    param.help = f"{(param.help or '').rstrip()} Range: {bounds}.".lstrip()
    param._get_number_range_help_str = _no_range


def _without_flag_types(params: list[Any]) -> list[Any]:
    """No Python type labels (``<str>``, ``<int range>``, ``<list[str]>``) in the help: a flag
    shows nothing, an option its value's name (``--host HOST``), an argument only its name."""
    for param in params:
        if param.param_type_name == "argument":
            param.display_type_rich = _no_type  # its metavar is in the name column already
        elif getattr(param, "is_flag", False) and param.metavar is None:
            param.metavar = ""  # a flag takes no value, so it has no type to show
        else:
            if param.metavar is None and param.name:
                param.metavar = param.name.upper()
            _range_in_help(param)
    return params


class Command(TyperCommand):
    def collect_usage_pieces(self, ctx: Any) -> list[str]:
        return _usage_pieces(self, ctx)

    def get_params(self, ctx: Any) -> list[Any]:
        return _without_flag_types(super().get_params(ctx))


class Group(TyperGroup):
    order: ClassVar[tuple[str, ...]] = ()
    """Subcommands named here come first, in this order; the rest follow as registered."""

    def collect_usage_pieces(self, ctx: Any) -> list[str]:
        return [*_usage_pieces(self, ctx), self.subcommand_metavar or "COMMAND [ARGS]..."]

    def get_params(self, ctx: Any) -> list[Any]:
        return _without_flag_types(super().get_params(ctx))

    def list_commands(self, ctx: Any) -> list[str]:
        names = super().list_commands(ctx)
        rank = {name: i for i, name in enumerate(self.order)}
        return sorted(names, key=lambda name: rank.get(name, len(rank)))
