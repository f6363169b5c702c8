"""How `hbgw … --help` reads: plain argument names, no type label on a flag, a set order.

Typer's own usage line wraps required arguments in braces and appends "..." even to a name
that already says it repeats (``{TEXT…}...``), and labels every flag ``<bool>``. These classes
keep the usage line to the metavars as written and leave a flag's type column empty.
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


def _without_flag_types(params: list[Any]) -> list[Any]:
    for param in params:
        if getattr(param, "is_flag", False) and param.metavar is None:
            param.metavar = ""  # a flag takes no value, so it has no type to show
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
