"""`hbgw chat` before it chats: where the API is, and one sentence when it is not there."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest
from fastapi import FastAPI, Request
from support.cli_fixtures import Hbgw
from support.http_server import serving


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_without_an_api_it_says_to_start_hbgw_up(hbgw: Hbgw) -> None:
    result = hbgw("chat")
    assert result.code == 2
    assert result.err == (
        "Error: No API to talk to: start `hbgw up` (it writes HBGW_HOME/api.json), "
        "or pass --url and --token (or set HBGW_API_URL and HBGW_API_TOKEN).\n"
    )


def test_a_url_without_a_token_is_not_enough(hbgw: Hbgw) -> None:
    result = hbgw("chat", "--url", "http://127.0.0.1:1")
    assert result.code == 2 and "pass --url and --token" in result.err


def test_a_broken_api_file_is_one_sentence(hbgw: Hbgw, tmp_path: Path) -> None:
    (tmp_path / "api.json").write_text("{not json")
    result = hbgw("chat")
    assert result.code == 2
    assert result.err.startswith("Error: ") and result.err.count("\n") == 1
    assert "api.json is not readable JSON" in result.err and "restart `hbgw up`" in result.err


@pytest.mark.parametrize("source", ["file", "env", "flags"])
def test_an_unreachable_api_is_one_sentence_not_a_traceback(
    hbgw: Hbgw, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, source: str
) -> None:
    url = f"http://127.0.0.1:{closed_port()}"
    args: list[str] = []
    if source == "file":
        (tmp_path / "api.json").write_text(json.dumps({"url": url, "token": "t", "owner": "o"}))
    elif source == "env":
        monkeypatch.setenv("HBGW_API_URL", url)
        monkeypatch.setenv("HBGW_API_TOKEN", "t")
    else:
        args = ["--url", url, "--token", "t"]
    result = hbgw("chat", "s1", *args)
    assert result.code == 1
    assert result.err.startswith(f"Error: Cannot reach the API at {url} (")
    assert result.err.endswith("— is `hbgw up` running?\n") and result.err.count("\n") == 1
    assert "Traceback" not in result.err + result.out


def test_flags_win_over_the_environment_and_the_file(
    hbgw: Hbgw, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    stale = f"http://127.0.0.1:{closed_port()}"
    (tmp_path / "api.json").write_text(json.dumps({"url": "http://file.invalid", "token": "t"}))
    monkeypatch.setenv("HBGW_API_URL", "http://env.invalid")
    monkeypatch.setenv("HBGW_API_TOKEN", "env-token")
    result = hbgw("chat", "s1", "--url", stale)
    assert f"Cannot reach the API at {stale} " in result.err


def test_chat_is_listed_with_its_options(hbgw: Hbgw) -> None:
    text = " ".join(hbgw("chat", "--help").out.split())
    assert "Usage: hbgw chat [OPTIONS] [SESSION]" in text
    for option in ("--url URL", "--token TOKEN", "Ctrl-D"):
        assert option in text


def test_the_token_of_hbgw_up_goes_only_to_its_own_api(hbgw: Hbgw, tmp_path: Path) -> None:
    """Issue 15, hole 9: `hbgw chat --url X` never sends api.json's token to X."""
    seen: list[str | None] = []
    other = FastAPI()

    @other.api_route("/{path:path}", methods=["GET", "POST"])
    async def anything(request: Request) -> dict[str, str]:
        seen.append(request.headers.get("authorization"))
        return {}

    own = f"http://127.0.0.1:{closed_port()}"
    (tmp_path / "api.json").write_text(json.dumps({"url": own, "token": "up-tok-5", "owner": "o"}))
    with serving(other) as url:
        result = hbgw("chat", "s1", "--url", url)
        same = hbgw("chat", "s1", "--url", own + "/")  # its own API: the token goes there
    assert result.code == 2, result
    assert "needs its own token: pass --token" in result.err
    assert f"only for its own API at {own}." in result.err
    assert seen == []
    assert same.code == 1 and "Cannot reach the API at" in same.err
