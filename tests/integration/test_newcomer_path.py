"""Issue 20, the newcomer's path: a session made by `hbgw session create` next to `hbgw up`
is one its API token (and so `hbgw chat`) can reach; `session show` says whose it is. A turn
whose model failed is `hbgw send`'s exit 5, its sentence naming the endpoint by host only."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from support.api_fixtures import ALICE, BOB, TOKENS, Api
from support.cli_fixtures import Hbgw
from support.harness import Gateway, gateway_settings
from support.tls_redis import free_port

from hbgw.cli.common import path_hint
from hbgw.cli.send_out import FAILED_TURN_EXIT
from hbgw.workers.agents.openai_agent import endpoint_host


def test_a_session_made_without_an_owner_belongs_to_the_local_owner(hbgw: Hbgw) -> None:
    created = hbgw("session", "create", "--platform", "cli", "--chat", "me")
    assert created.code == 0, created.err
    sid = created.out.strip()
    assert "\n" not in sid  # `sid=$(hbgw session create …)` still gets the id alone
    assert "Owner: local" in created.err
    assert "owner     local" in hbgw("session", "show", sid).out
    assert json.loads(hbgw("session", "show", sid, "--json").out)["owner"] == "local"


def test_a_named_owner_is_kept_and_not_announced(hbgw: Hbgw) -> None:
    created = hbgw("session", "create", "--platform", "cli", "--chat", "me", "--owner", "zoe")
    assert created.err == ""
    assert "owner     zoe" in hbgw("session", "show", created.out.strip()).out


def test_the_running_up_token_reaches_a_cli_made_session(
    hbgw: Hbgw, api: Api, tmp_path: Path
) -> None:
    # What `hbgw up` writes while it runs: its API, its token, and the owner the token speaks for.
    (tmp_path / "api.json").write_text(
        json.dumps({"url": api.url, "token": TOKENS[BOB], "owner": BOB})
    )
    created = hbgw("session", "create", "--platform", "cli", "--chat", "me")
    sid = created.out.strip()
    assert f"Owner: {BOB}" in created.err
    with api.owner(BOB) as bob, api.owner(ALICE) as alice:
        assert bob.get(f"/v1/sessions/{sid}").status_code == 200  # what `hbgw chat` asks first
        assert sid in [s["id"] for s in bob.get("/v1/sessions").json()["sessions"]]
        assert alice.get(f"/v1/sessions/{sid}").status_code == 404


def test_without_up_the_first_configured_token_owns_it(
    hbgw: Hbgw, api: Api, monkeypatch: pytest.MonkeyPatch
) -> None:
    pairs = ",".join(f"{owner}:{token}" for owner, token in TOKENS.items())
    monkeypatch.setenv("HBGW_API_TOKENS", pairs)
    sid = hbgw("session", "create", "--platform", "cli", "--chat", "me").out.strip()
    with api.owner(ALICE) as alice:
        assert alice.get(f"/v1/sessions/{sid}").status_code == 200


def test_the_endpoint_is_named_by_host_and_port_only() -> None:
    assert endpoint_host("https://api.example.com/v1") == "api.example.com"
    assert endpoint_host("http://user:pw@127.0.0.1:11434/v1/k-secret") == "127.0.0.1:11434"
    assert endpoint_host("http://[::1]:8000/v1") == "[::1]:8000"
    assert endpoint_host("not a url") == "HBGW_OPENAI_BASE_URL"


def test_send_of_a_turn_whose_model_is_unreachable_exits_5_naming_the_host(
    hbgw: Hbgw, tmp_path: Path, redis_url: str, redis_ns: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    port = free_port()  # nothing listens there
    settings = gateway_settings(
        tmp_path,
        redis_url,
        redis_ns,
        agent="openai",
        openai_base_url=f"http://bob:hunter2@127.0.0.1:{port}/v1/path-key",
        openai_model="m",
        openai_api_key="sk-never-shown",
        openai_max_retries=0,
    )
    gw = Gateway(settings, redis_url)
    try:
        for name, value in gw.env().items():
            monkeypatch.setenv(name, value)
        sid = gw.session()
        with gw.worker("w1"):
            result = hbgw("send", sid, "hello", "--timeout", "60")
    finally:
        gw.close()
    assert result.code == FAILED_TURN_EXIT, result
    assert result.out.startswith("⚠ The turn failed: ")
    assert f"The model endpoint at 127.0.0.1:{port} could not be reached" in result.out
    for secret in ("hunter2", "bob", "path-key", "sk-never-shown"):
        assert secret not in result.out + result.err


ROOT = Path(__file__).resolve().parents[2]


def _using_it_lines() -> list[str]:
    text = (ROOT / "README.md").read_text()
    section = text[text.index("## Using it") : text.index("| command | what it does |")]
    blocks = re.findall(r"```sh\n(.*?)```", section, flags=re.DOTALL)
    return [line.split("  #")[0].strip() for block in blocks for line in block.splitlines()]


def test_the_readme_path_uses_commands_that_exist(hbgw: Hbgw) -> None:
    lines = _using_it_lines()
    assert lines[0] == "make install && . .venv/bin/activate"
    assert re.search(r"^install:", (ROOT / "Makefile").read_text(), flags=re.MULTILINE)
    makefile = (ROOT / "Makefile").read_text()
    assert "VENV := .venv" in makefile and "-m venv $(VENV)" in makefile  # makes bin/activate
    commands = [re.sub(r"^\w+=\$\(|\)$|\s*&$", "", line) for line in lines[1:]]
    assert all(c.startswith("hbgw ") for c in commands), commands
    for command in commands:
        words = [w for w in command.split()[1:] if re.fullmatch(r"[a-z]+", w)][:2]
        shown = hbgw(*words[:1], "--help")
        if "COMMAND" in shown.out and len(words) > 1:
            shown = hbgw(*words, "--help")
        assert shown.code == 0, (command, shown.err)
        options = re.findall(r"--[a-z-]+", command)
        assert all(option in shown.out for option in options), (command, options)


def test_the_path_hint_says_how_to_put_hbgw_on_the_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    hint = path_hint()
    assert hint is not None and "not on this shell's PATH" in hint
    assert "activate" in hint or "pipx install -e ." in hint
    script = tmp_path / "hbgw"
    script.write_text("#!/bin/sh\n")
    script.chmod(0o755)
    assert path_hint() is None
