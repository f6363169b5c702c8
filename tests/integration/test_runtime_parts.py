"""Each unit is handed the part of the ``Runtime`` it uses (issue 16): in ``workers/`` only the
turn runner, the worker's composition root, takes a ``Runtime``; every other unit's parameter
list shows what it touches (store parts, the gate, ``DueSettle``, the clock, …). The invariant
check is handed the ledger, the gate and the index, not the runtime either."""

from __future__ import annotations

import ast
from pathlib import Path

from support.harness import Gateway

ROOT = Path(__file__).resolve().parents[2]
# The composition roots: they keep the Runtime and hand each unit its parts.
MAY_TAKE_RUNTIME = {"workers/runner.py"}
CHECKED = [*sorted((ROOT / "workers").rglob("*.py")), ROOT / "hbgw" / "invariants.py"]


def names_runtime(node: ast.expr | None) -> bool:
    """An annotation that mentions ``Runtime`` (``Runtime``, ``Runtime | None``, a string)."""
    if node is None:
        return False
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return "Runtime" in node.value.split("[")[0].replace("|", " ").split()
    return any(isinstance(n, ast.Name) and n.id == "Runtime" for n in ast.walk(node))


def runtime_takers(source: str) -> list[str]:
    """``function(parameter)`` for every parameter annotated with ``Runtime``, and the import of
    ``hbgw.state.runtime`` itself."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.module == "hbgw.state.runtime":
            found.append("import hbgw.state.runtime")
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            args = node.args
            every = [*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg]
            found += [
                f"{node.name}({a.arg})"
                for a in every
                if a is not None and names_runtime(a.annotation)
            ]
    return found


def test_no_unit_below_the_runner_takes_the_whole_runtime() -> None:
    takers = {
        rel: found
        for path in CHECKED
        if (rel := str(path.relative_to(ROOT))) not in MAY_TAKE_RUNTIME
        and (found := runtime_takers(path.read_text(encoding="utf-8")))
    }
    assert takers == {}, (
        "hand these units the parts they use (store parts, the gate, DueSettle, the clock, "
        f"the worker's name), not the Runtime; the runner builds them: {takers}"
    )


def test_the_check_finds_a_unit_that_takes_the_runtime() -> None:
    source = (
        "from hbgw.state.runtime import Runtime\n"
        "def admit(rt: Runtime, sid: str) -> None: ...\n"
        "def maybe(*, rt: 'Runtime | None' = None) -> None: ...\n"
        "def fine(clock: object) -> None: ...\n"
    )
    assert runtime_takers(source) == ["import hbgw.state.runtime", "admit(rt)", "maybe(rt)"]


def test_the_runtime_builds_its_parts_once(gateway: Gateway) -> None:
    rt = gateway.rt
    assert rt.redis is rt.redis and rt.redis.client is rt.client
    assert rt.due is rt.due and rt.due.index is rt.index
    assert rt.due.heartbeats is rt.store.heartbeats and rt.due.jobs is rt.store.jobs
