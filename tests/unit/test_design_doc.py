"""docs/design.md's rule table names real code (issue 16): every file it names exists, and every
function, method, class or constant it names in backticks is defined in one of the files that
row names (``kept by`` and ``how``); a store step named as callers reach it
(``store.ledger.begin_fire``) is a public method of that part of the store. A method deleted or
moved makes this fail until the table says where the rule lives now."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from hbgw.sessions.store import Store

ROOT = Path(__file__).resolve().parents[2]
DESIGN = ROOT / "docs" / "design.md"
PACKAGES = ["core", "sessions", "state", "beat", "workers", "gateway", "hbgw", "chaos", "bench"]

CODE = re.compile(r"`([^`]+)`")
# `name`, `Class.name`, `name()`, `name(args)`: a Python name, perhaps dotted, perhaps called.
IDENTIFIER = re.compile(r"^([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*)(?:\(.*\))?$")
SOURCE = (".py", ".lua")


@dataclass(frozen=True)
class Row:
    rule: str
    cells: str  # the "kept by" and "how" cells


def rule_rows() -> list[Row]:
    lines = DESIGN.read_text(encoding="utf-8").split("## Where each rule lives", 1)[1]
    rows = []
    for line in lines.split("\n## ", 1)[0].splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 3 and cells[0] not in ("rule", "---"):
            rows.append(Row(cells[0], f"{cells[1]} {cells[2]}"))
    return rows


def is_path(span: str) -> bool:
    return "/" in span or span.endswith(SOURCE)


def resolve(span: str) -> list[Path]:
    """The source files a named path stands for: a file, a folder's files, or a bare file name
    found in the packages (``ledger_steps.py``)."""
    path = ROOT / span
    if path.is_dir():
        return sorted(p for p in path.rglob("*") if p.suffix in SOURCE)
    if path.is_file():
        return [path]
    return [p for package in PACKAGES for p in (ROOT / package).rglob(Path(span).name)]


def defines(text: str, name: str) -> bool:
    """``def name``, ``class name``, or ``name =`` / ``name:`` at the start of a line."""
    pattern = rf"^\s*(?:(?:async\s+)?def|class)\s+{name}\b|^\s*{name}\s*[:=]"
    return re.search(pattern, text, re.MULTILINE) is not None


def store_step_missing(name: str) -> list[str]:
    """``store.<part>.<step>``: the step as callers reach it, a public method of that part
    (``Store.PARTS``); what does not resolve."""
    _, part, *rest = name.split(".")
    if part not in Store.PARTS:
        return [part]
    return [step for step in rest[:1] if not callable(getattr(Store.PARTS[part], step, None))]


def test_the_table_is_found() -> None:
    rules = [row.rule for row in rule_rows()]
    assert len(rules) >= 12 and "9 exact counting" in rules, rules


def test_every_file_the_rule_table_names_exists() -> None:
    missing = [
        f"{row.rule}: {span}"
        for row in rule_rows()
        for span in CODE.findall(row.cells)
        if is_path(span) and not resolve(span)
    ]
    assert not missing, f"docs/design.md's rule table names files that do not exist: {missing}"


def test_every_name_in_the_rule_table_is_defined_where_the_row_says() -> None:
    unresolved = []
    for row in rule_rows():
        spans = CODE.findall(row.cells)
        files = [f for span in spans if is_path(span) for f in resolve(span)]
        text = "\n".join(f.read_text(encoding="utf-8") for f in files)
        for span in spans:
            match = IDENTIFIER.match(span)
            if is_path(span) or match is None:
                continue
            if match.group(1).startswith("store."):
                missing = store_step_missing(match.group(1))
            else:
                missing = [part for part in match.group(1).split(".") if not defines(text, part)]
            if missing:
                unresolved.append(f"{row.rule}: `{span}` ({', '.join(missing)} not defined)")
    assert not unresolved, (
        "docs/design.md's rule table names code that is not defined in the files of its row "
        f"(fix the table, or name the file that holds it): {unresolved}"
    )


def test_every_call_the_design_names_is_defined_in_the_packages() -> None:
    """Beyond the table: a backticked call anywhere on the page (`begin_fire(…)`,
    `HeartbeatState.next_due()`) names a function or method the packages define."""
    calls = set(re.findall(r"`([A-Za-z_][\w.]*)\([^`]*\)`", DESIGN.read_text(encoding="utf-8")))
    text = "\n".join(
        p.read_text(encoding="utf-8")
        for package in PACKAGES
        for p in (ROOT / package).rglob("*.py")
    )
    # The last part is the function; a capitalised part before it is its class (a lower-case
    # one is a module path, `state.dispatch.context_of`).
    undefined = sorted(
        call
        for call in calls
        for i, part in enumerate(call.split("."))
        if (i == call.count(".") or part[0].isupper()) and not defines(text, part)
    )
    assert not undefined, f"docs/design.md names calls nothing defines: {undefined}"
