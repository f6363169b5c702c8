"""Issue 15, holes 6 and 8: `hbgw up` hands its children the secrets they use, and prints none.

A real `hbgw up` with the OpenAI-compatible agent against a fake endpoint on loopback: the
endpoint receives the configured key (it received ``Bearer unused``); beat, which sends the
stall alerts, has HBGW_ALERT_WEBHOOK; a secret goes only to the role that uses it.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from support.fake_openai import FakeOpenAI, Text
from support.http_server import serving
from support.up_process import hbgw_up, user_env

KEY = "sk-up-secret-3141"
WEBHOOK = "http://127.0.0.1:9/hooks/stalls?token=whsec-2718"
SIGNING_SECRET = "sign-alerts-5a9f3c"


def _children_env(home: Path) -> dict[str, dict[str, str]]:
    """The environment of each `hbgw ROLE` process running on ``home``, by role."""
    found = {}
    for proc in Path("/proc").iterdir():
        try:
            cmd = (proc / "cmdline").read_bytes().split(b"\0")
            raw = (proc / "environ").read_bytes()
        except (OSError, ValueError):
            continue
        env = dict(
            item.split("=", 1) for item in raw.decode(errors="replace").split("\0") if "=" in item
        )
        if env.get("HBGW_HOME") == str(home) and b"hbgw" in cmd and len(cmd) > 3:
            args = [c.decode() for c in cmd if c]
            role = args[args.index("hbgw") + 1]
            found[args[-1] if role == "worker" else role] = env
    return found


def test_up_passes_the_agent_key_and_the_webhook_and_prints_no_secret(tmp_path: Path) -> None:
    endpoint = FakeOpenAI().then(Text("hello from the model"))
    with serving(endpoint.app()) as url:
        settings = {
            "HBGW_AGENT": "openai",
            "HBGW_OPENAI_BASE_URL": f"{url}/v1",
            "HBGW_OPENAI_MODEL": "main-model",
            "HBGW_OPENAI_API_KEY": KEY,
            "HBGW_ALERT_WEBHOOK": WEBHOOK,
            # A loopback alert receiver is an inside address, which the operator allows.
            "HBGW_WEBHOOK_ALLOW_NETWORKS": "127.0.0.1/32",
            "HBGW_ALERT_WEBHOOK_SECRET": SIGNING_SECRET,
            "HBGW_API_PORT": "0",
        }
        with hbgw_up(tmp_path, **settings):
            env = user_env(tmp_path, **settings)
            run = [sys.executable, "-m", "hbgw"]
            sid = subprocess.run(
                [*run, "session", "create", "--platform", "cli", "--chat", "me"],
                env=env,
                capture_output=True,
                text=True,
                timeout=60,
                check=True,
            ).stdout.strip()
            sent = subprocess.run(
                [*run, "send", sid, "hello", "--timeout", "60"],
                env=env,
                capture_output=True,
                text=True,
                timeout=90,
            )
            children = _children_env(tmp_path)
    assert sent.stdout.strip() == "hello from the model", sent
    assert endpoint.authorizations == [f"Bearer {KEY}"]
    assert {"beat", "w1", "w2", "api"} <= set(children)
    assert children["beat"].get("HBGW_ALERT_WEBHOOK") == WEBHOOK
    assert children["beat"].get("HBGW_ALERT_WEBHOOK_SECRET") == SIGNING_SECRET
    assert children["w1"].get("HBGW_OPENAI_API_KEY") == KEY
    assert "HBGW_OPENAI_API_KEY" not in children["beat"] | children["api"]
    assert "HBGW_ALERT_WEBHOOK" not in children["w1"] | children["api"]
    assert "HBGW_ALERT_WEBHOOK_SECRET" not in children["w1"] | children["api"]
    printed = (tmp_path / "up.out").read_text()
    assert KEY not in printed and "whsec-2718" not in printed and SIGNING_SECRET not in printed
    # Hole 8: the embedded Redis has a password, which up hands its children but never prints.
    password = (tmp_path / "redis" / "password").read_text().strip()
    assert password and password not in printed
    assert children["w1"]["HBGW_REDIS_URL"].startswith(f"redis://:{password}@127.0.0.1:")
    for private in [tmp_path / "hbgw.sqlite3", *(tmp_path / "logs").glob("*.log")]:
        assert private.stat().st_mode & 0o777 == 0o600, private
