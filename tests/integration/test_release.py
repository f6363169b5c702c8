"""Release hygiene: installs take their versions from requirements.lock, the version comes from
git tags, a CHANGELOG is kept, and `make demo` installs the runtime only (issue 20)."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any

import pytest
from support.cli_fixtures import Hbgw

ROOT = Path(__file__).resolve().parents[2]
PYPROJECT: dict[str, Any] = tomllib.loads((ROOT / "pyproject.toml").read_text())


def _name(requirement: str) -> str:
    return re.split(r"[\s\[<>=!~;]", requirement, maxsplit=1)[0].lower().replace("_", "-")


def _locked() -> dict[str, str]:
    pins: dict[str, str] = {}
    for line in (ROOT / "requirements.lock").read_text().splitlines():
        if line and not line.startswith("#"):
            name, sep, pinned = line.partition("==")
            assert sep and pinned, f"requirements.lock: {line!r} is not NAME==VERSION"
            pins[name.lower().replace("_", "-")] = pinned
    return pins


def test_the_lock_pins_every_dependency_of_the_project_and_its_extras() -> None:
    project = PYPROJECT["project"]
    wanted = {_name(r) for r in project["dependencies"]}
    for extra in project["optional-dependencies"].values():
        wanted |= {_name(r) for r in extra}
    wanted.discard(project["name"])  # the dev extra names the bench extra through the project
    locked = _locked()
    assert sorted(wanted - set(locked)) == []
    assert project["name"] not in locked


def _recipe(target: str) -> tuple[str, str]:
    """The prerequisites and the recipe of a Makefile target."""
    text = (ROOT / "Makefile").read_text()
    match = re.search(rf"^{re.escape(target)}:([^\n]*)\n((?:\t[^\n]*\n)*)", text, re.MULTILINE)
    assert match, target
    return match.group(1), match.group(2)


def test_every_install_of_the_makefile_uses_the_lock() -> None:
    text = (ROOT / "Makefile").read_text()
    installs = [line for line in text.splitlines() if "pip install" in line and " -e " in line]
    assert installs
    lock_target = _recipe("lock")[1]
    for line in installs:
        assert "-c $(LOCK)" in line or line.strip() in lock_target, line
    assert re.search(r"^LOCK := requirements.lock$", text, re.MULTILINE)


def test_make_demo_installs_the_runtime_only_and_names_a_next_step() -> None:
    prerequisites, recipe = _recipe("demo")
    assert prerequisites.split("##")[0].split() == ["$(RUNTIME_STAMP)"]
    runtime = _recipe("$(RUNTIME_STAMP)")[1]
    assert "pip install --quiet -c $(LOCK) -e .\n" in runtime  # no extras: no dev, no bench
    assert "Next:" in recipe and "hbgw up" in recipe
    install_prerequisites = _recipe("$(STAMP)")[0]
    assert "$(RUNTIME_STAMP)" in install_prerequisites


def test_the_version_comes_from_git_tags() -> None:
    project = PYPROJECT["project"]
    assert "version" not in project and project["dynamic"] == ["version"]
    assert any(_name(r) == "setuptools-scm" for r in PYPROJECT["build-system"]["requires"])
    assert "fallback_version" in PYPROJECT["tool"]["setuptools_scm"]
    # The Docker build has no .git: the version comes in as a build argument.
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert "SETUPTOOLS_SCM_PRETEND_VERSION" in dockerfile and "ARG HBGW_VERSION" in dockerfile


def test_a_changelog_has_an_unreleased_section() -> None:
    text = (ROOT / "CHANGELOG.md").read_text()
    assert re.search(r"^## Unreleased$", text, re.MULTILINE)
    assert "hbgw --version" in text


@pytest.mark.parametrize("failed", [0, 1])
def test_the_demo_summary_explains_its_failed_runs(
    hbgw: Hbgw, monkeypatch: pytest.MonkeyPatch, failed: int
) -> None:
    from hbgw import demo as demo_module

    details = {"lock lost before delivery": failed} if failed else {}
    summary = {"sessions": 30, "failed": failed, "failed_details": details, "invariants_ok": True}
    monkeypatch.setattr(demo_module, "run_demo", lambda *_a, **_k: summary)
    result = hbgw("demo")
    assert result.code == 0, result.err
    text = " ".join(result.out.split())
    assert f"failed {failed}" in text and "failed_details" not in text
    explained = "lock lost before delivery ×1" in text and "SIGKILLs worker w2" in text
    assert explained is bool(failed)
