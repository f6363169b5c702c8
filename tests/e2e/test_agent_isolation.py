"""Issue 29, finding 3: the command agent cannot read the worker's secrets by any path.

A real `hbgw worker` process, started with distinctive fake secrets in its environment (as
compose, Helm and `hbgw up` start one), runs ``tests/support/secret_probe.sh`` as its command
agent. The probe reads the worker's original environment block (/proc/$PPID/environ), its
command line, its memory (/proc/$PPID/mem), its descriptors and its own, its own environment,
and every file under HBGW_HOME (api.json, the embedded Redis's password, the worker's log), and
answers with what it read. Before the fix the delivered reply held every secret: the child ran
as the worker's user (root here) and read them all.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.harness import Gateway, gateway_settings, wait_until

from hbgw.core.clock import utcnow
from hbgw.core.private import private_dir, write_private
from hbgw.procs import spawn_hbgw, stop_all

pytestmark = [
    pytest.mark.timeout(300),
    pytest.mark.skipif(os.geteuid() != 0, reason="switching the agent's user needs root"),
]

PROBE = Path(__file__).parents[1] / "support" / "secret_probe.sh"
# Every secret carries "xyzzy", which the probe looks for in the worker's memory.
SECRETS = {
    "HBGW_SLACK_BOT_TOKEN": "xoxb-slack-xyzzy-Bot7Tq",
    "HBGW_SLACK_SIGNING_SECRET": "slack-sign-xyzzy-4Kd9",
    "HBGW_TELEGRAM_BOT_TOKEN": "12345:tg-xyzzy-Bq8Wv",
    "HBGW_TELEGRAM_SECRET_TOKEN": "tg-secret-xyzzy-Zr5",
    "HBGW_WEBHOOK_SECRET": "webhook-xyzzy-Hm3Px",
    "HBGW_OPENAI_API_KEY": "sk-openai-xyzzy-Jw2",
    "HBGW_ADMIN_TOKEN": "admin-xyzzy-Lq6Nf2",
    "HBGW_API_TOKENS": "alice:alice-xyzzy-Vt4Rc",
}
API_JSON_TOKEN = "api-json-xyzzy-Ce1"
REDIS_PASSWORD = "redis-pass-xyzzy-Yg0"


@pytest.fixture
def home() -> Iterator[Path]:
    """An HBGW_HOME others may enter (0711, as a shared directory might be): its files must
    still be the worker's alone. pytest's own tmp_path sits in a directory only root enters,
    which would hide the files whatever their modes."""
    path = Path(tempfile.mkdtemp(prefix="hbgw-isolation-"))
    path.chmod(0o711)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def readable_probe(home: Path) -> Path:
    """The probe where the agent's user can read it: not in the checkout (a clone in a
    directory only root enters, as in CI), but in the home, which others may enter."""
    probe = home / PROBE.name
    shutil.copy(PROBE, probe)
    probe.chmod(0o755)
    return probe


def test_the_command_agent_reads_no_secret_of_its_worker(
    home: Path, redis_url: str, redis_ns: str
) -> None:
    write_private(
        home / "api.json", json.dumps({"url": "http://127.0.0.1:1", "token": API_JSON_TOKEN})
    )
    write_private(private_dir(home / "redis") / "password", REDIS_PASSWORD)
    settings = gateway_settings(
        home,
        redis_url,
        redis_ns,
        agent_command=f"/bin/sh {readable_probe(home)} {home}",
        agent_same_user=False,  # the default: the harness opts out for its own agent script
        agent_timeout=60,
    )
    gw = Gateway(settings, redis_url)
    worker = spawn_hbgw(
        ["worker", "--name", "w1"], env={**gw.env(), **SECRETS}, log=home / "worker.log"
    )
    try:
        wait_until(lambda: gw.rt.registry.live(gw.rt.now_ms()), 60, "the worker to register")
        sid = gw.store.sessions.create_session(
            platform="cli", chat="me", thread=None, now=utcnow()
        ).id
        gw.due_now(sid)
        gw.tick()
        gw.final_runs(sid, timeout=90)
        replies = wait_until(lambda: gw.deliveries(sid), 30, "the probe's reply")
    finally:
        stop_all([worker], timeout=20)
        gw.close()
    reply = "\n".join(str(r["text"]) for r in replies)
    assert "--- end" in reply, reply  # the probe ran every step
    assert "probe uid=0" not in reply, reply
    leaked = [
        value
        for value in [*SECRETS.values(), "alice-xyzzy-Vt4Rc", API_JSON_TOKEN, REDIS_PASSWORD]
        if value in reply
    ]
    assert not leaked, reply
    assert "xyzzy" not in reply, reply
    # No descriptor of the worker's (sockets to Redis and SQL, its log) reached the child: its
    # stdin, stdout and stderr pipes, and the directory `ls` itself opened.
    own_fds = reply.split("--- own fds", 1)[1].split("\n--- ", 1)[0]
    targets = [line.split(" -> ", 1)[1] for line in own_fds.splitlines() if " -> " in line]
    assert targets and all(t.startswith(("pipe:", "/proc/")) for t in targets), own_fds
