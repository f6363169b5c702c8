"""The benchmarks the runner knows, in the order it runs them."""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType

from bench.context import BenchContext, Result

Bench = Callable[[BenchContext], Result]


def benchmarks() -> dict[str, Bench]:
    # Imported here so one benchmark's missing optional package names itself, not the runner.
    from importlib import import_module

    names = MODULES
    out: dict[str, Bench] = {}
    for module_name in names:
        module: ModuleType = import_module(f"bench.{module_name}")
        out[module.NAME] = module.run
    return out


# Each module: NAME (str) and run(ctx) -> dict. Add new benchmarks here.
MODULES: list[str] = [
    "claim",
    "tick",
    "memory",
    "replicas",
    "e2e",
    "redis_latency",
    "streams",
    "inflight",
    "jitter_burst",
    "ledger_size",
    "cli_start",
    "grammar_parse",
    "workers_scaling",
    "sizing",  # last: it reads the others' newest results
]
