"""`hbgw api` as an operator runs it: refuses an open address without tokens, logs its URL,
never a token, and stops cleanly on SIGTERM with an event stream open."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from support.api_fixtures import EventReader
from support.cli_fixtures import Hbgw
from support.harness import wait_until

from hbgw.gateway.api.auth import parse_tokens

TOKEN = "sEcReT-alice-93f0b7"
ADMIN = "sEcReT-admin-4411aa"


def test_no_token_no_open_address(hbgw: Hbgw) -> None:
    result = hbgw("api", "--host", "0.0.0.0")
    assert result.code == 2
    assert result.err.strip() == (
        "Error: No API token is configured, so the API will not listen on 0.0.0.0: set "
        "HBGW_API_TOKENS (owner:token pairs) or HBGW_ADMIN_TOKEN, or use --host 127.0.0.1."
    )


def test_a_malformed_token_pair_is_one_sentence(
    hbgw: Hbgw, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HBGW_API_TOKENS", f"alice:{TOKEN},{ADMIN}")
    result = hbgw("api", "--port", "0")
    assert result.code == 2
    assert "HBGW_API_TOKENS pair 2 is not owner:token" in result.err
    assert TOKEN not in result.err and ADMIN not in result.err


def test_token_pairs_parse() -> None:
    x, y = "x1-Token-a7Bq3zWm", "y2-Token-k9Rp4vNc"
    assert parse_tokens(f" a:{x} , b : {y}") == [("a", x), ("b", y)]
    for bad in ("a", "a:", f":{x}", f"a:{x},,b:{y}"):
        with pytest.raises(Exception, match="not owner:token"):
            parse_tokens(bad)
    with pytest.raises(Exception, match="repeats the token"):
        parse_tokens(f"a:{x},b:{x}")


@pytest.mark.parametrize(
    ("tokens", "admin", "sentence"),
    [
        # The admin token equal to an owner's would make that owner an admin.
        (f"alice:{TOKEN}", TOKEN, "HBGW_ADMIN_TOKEN is the token of HBGW_API_TOKENS pair 1"),
        ("alice:k", ADMIN, "The token of HBGW_API_TOKENS pair 1 has 1 characters"),
        (f"alice:{TOKEN}", "k", "The token of HBGW_ADMIN_TOKEN has 1 characters"),
        # A comma meant inside alice's token splits it into a short token and a new owner.
        ("alice:sEcReT-a,bob:lice-93f0b7-x1y2z3", ADMIN, "pair 1 has 8 characters"),
        (f"alice:{TOKEN}:x", ADMIN, "pair 1 has a character a bearer token cannot carry"),
    ],
)
def test_weak_or_confusable_tokens_are_refused_at_start(
    hbgw: Hbgw, monkeypatch: pytest.MonkeyPatch, tokens: str, admin: str, sentence: str
) -> None:
    monkeypatch.setenv("HBGW_API_TOKENS", tokens)
    monkeypatch.setenv("HBGW_ADMIN_TOKEN", admin)
    result = hbgw("api", "--port", "0")
    assert result.code == 2, result.err
    assert sentence in result.err
    assert TOKEN not in result.err and ADMIN not in result.err


def test_config_never_shows_tokens(hbgw: Hbgw, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HBGW_API_TOKENS", f"alice:{TOKEN}")
    monkeypatch.setenv("HBGW_ADMIN_TOKEN", ADMIN)
    text = hbgw("config").out
    assert "HBGW_API_TOKENS=********" in text and "HBGW_ADMIN_TOKEN=********" in text
    assert TOKEN not in text and ADMIN not in text


def test_api_process_logs_its_url_never_a_token(
    tmp_path: Path, redis_url: str, redis_ns: str
) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HBGW_")}
    env.update(
        HBGW_HOME=str(tmp_path),
        HBGW_REDIS_URL=redis_url,
        HBGW_NAMESPACE=redis_ns,
        HBGW_API_TOKENS=f"alice:{TOKEN}",
        HBGW_ADMIN_TOKEN=ADMIN,
        HBGW_LOG_FORMAT="json",
        HBGW_LOG_LEVEL="DEBUG",
    )
    log_path = tmp_path / "api.log"
    with log_path.open("w") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "hbgw", "api", "--port", "0"],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    try:
        found = wait_until(
            lambda: re.search(r"API listening on (http://127\.0\.0\.1:\d+)", log_path.read_text()),
            60,
            "the API's URL in its log",
        )
        url = found.group(1)
        wait_until(lambda: _answers(url), 30, "the API")
        with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {TOKEN}"}) as alice:
            sid = alice.post("/v1/sessions", json={"platform": "cli", "chat": "me"}).json()["id"]
            wrong = alice.get("/v1/sessions", headers={"Authorization": f"Bearer {ADMIN}x"})
            assert wrong.status_code == 401
            with EventReader(alice, f"/v1/sessions/{sid}/events") as reader:
                assert reader.status == 200
                proc.send_signal(signal.SIGTERM)
                # uvicorn re-raises the signal after its clean shutdown.
                assert proc.wait(60) in (0, -signal.SIGTERM)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
    text = log_path.read_text()
    assert TOKEN not in text and ADMIN not in text
    lines = [json.loads(line) for line in text.splitlines() if line.startswith("{")]
    start = [line for line in lines if line.get("action") == "api.start"]
    assert start and start[0]["url"] == url
    assert "Application shutdown complete" in text
    assert "graceful shutdown exceeded" not in text


def _answers(url: str) -> bool:
    try:
        return httpx.get(f"{url}/healthz", timeout=2).status_code == 200
    except httpx.HTTPError:
        return False
