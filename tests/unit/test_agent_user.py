"""Issue 29, finding 3: who the command agent runs as, and every choice the worker refuses.

Before the fix the child always ran as the worker's own user (root in CI), which reads the
worker's /proc environ and memory and its HBGW_HOME files; there was no user to choose and
nothing to refuse. tests/e2e/test_agent_isolation.py runs the real thing.
"""

from __future__ import annotations

import logging
import os
import pwd
from pathlib import Path

import pytest

from hbgw.core.errors import BadInput
from hbgw.core.settings import Settings
from hbgw.workers.agents.agent_user import (
    AgentUser,
    agent_user,
    can_switch_user,
    check_unreadable_by,
)

NOBODY = pwd.getpwnam("nobody")


def test_the_default_user_is_nobody_switched_to_with_its_own_ids() -> None:
    assert Settings().agent_user == "nobody" and Settings().agent_same_user is False
    user = agent_user("nobody", same_user=False, worker_uid=0, can_switch=True)
    assert user == AgentUser("nobody", NOBODY.pw_uid, NOBODY.pw_gid, NOBODY.pw_dir)
    # nobody's home does not exist: the child starts in /, never in the worker's directory.
    assert user.workdir == (NOBODY.pw_dir if Path(NOBODY.pw_dir).is_dir() else "/")


def test_an_unknown_user_is_refused_with_how_to_create_it() -> None:
    with pytest.raises(BadInput, match=r"HBGW_AGENT_USER=no-such-agent is not a user") as err:
        agent_user("no-such-agent", same_user=False, worker_uid=0, can_switch=True)
    assert "useradd --system --no-create-home no-such-agent" in str(err.value)


def test_root_is_refused_as_the_agent_user() -> None:
    with pytest.raises(BadInput, match="is root, which can read every secret of the worker"):
        agent_user("root", same_user=False, worker_uid=0, can_switch=True)


def test_the_workers_own_user_is_refused_without_the_opt_out() -> None:
    with pytest.raises(BadInput, match="is the worker's own user") as err:
        agent_user("nobody", same_user=False, worker_uid=NOBODY.pw_uid, can_switch=False)
    assert "HBGW_AGENT_SAME_USER=true" in str(err.value)


def test_a_worker_that_cannot_switch_users_refuses_with_both_ways_out() -> None:
    with pytest.raises(BadInput) as err:
        agent_user("nobody", same_user=False, worker_uid=10001, can_switch=False)
    said = str(err.value)
    assert said.startswith("The worker runs as uid 10001 and cannot run the command agent as")
    assert "run the worker as root" in said and "HBGW_AGENT_SAME_USER=true" in said


@pytest.mark.parametrize(("worker_uid", "as_root"), [(10001, False), (0, True)])
def test_the_same_user_opt_out_runs_as_the_worker_and_warns(
    caplog: pytest.LogCaptureFixture, worker_uid: int, as_root: bool
) -> None:
    with caplog.at_level(logging.WARNING):
        user = agent_user("ignored", same_user=True, worker_uid=worker_uid, can_switch=False)
    assert user is None
    (record,) = [r for r in caplog.records if getattr(r, "action", None) == "agent.same_user"]
    assert record.levelno == logging.WARNING
    assert "can read the worker's files" in record.getMessage()
    assert ("AS ROOT" in record.getMessage()) is as_root


@pytest.mark.parametrize(
    ("caps", "can"),
    [("000001ffffffffff", True), ("0000000000000080", False), ("00000000000000c0", True)],
)
def test_switching_needs_both_setuid_and_setgid(tmp_path: Path, caps: str, can: bool) -> None:
    status = tmp_path / "status"
    status.write_text(f"Name:\tpython\nCapInh:\t0000000000000000\nCapEff:\t{caps}\n")
    assert can_switch_user(status) is can


def test_without_proc_only_root_counts_as_able_to_switch(tmp_path: Path) -> None:
    assert can_switch_user(tmp_path / "missing") is (os.geteuid() == 0)


@pytest.mark.parametrize(
    ("mode", "owner", "group", "refused"),
    [
        (0o600, 0, 0, False),
        (0o400, 0, 0, False),
        (0o644, 0, 0, True),  # a Kubernetes Secret volume's default mode
        (0o640, 0, NOBODY.pw_gid, True),
        (0o600, NOBODY.pw_uid, 0, True),
        (0o660, 0, 0, False),
    ],
)
def test_a_secret_file_the_agent_user_can_read_is_refused(
    tmp_path: Path, mode: int, owner: int, group: int, refused: bool
) -> None:
    """The Redis client key is a secret the worker reads from a file; the command's user
    must not be able to read it too (owner, group or everyone)."""
    key = tmp_path / "redis.key"
    key.write_text("-----BEGIN PRIVATE KEY-----")
    key.chmod(mode)
    user = AgentUser("nobody", NOBODY.pw_uid, NOBODY.pw_gid, NOBODY.pw_dir)
    if os.geteuid() != 0 and (owner or group):
        pytest.skip("giving a file to another user needs root")
    os.chown(key, owner if os.geteuid() == 0 else -1, group if os.geteuid() == 0 else -1)
    files = {"HBGW_REDIS_TLS_KEY": key, "HBGW_REDIS_TLS_CERT": None}
    if not refused:
        check_unreadable_by(user, files)
        return
    with pytest.raises(BadInput) as err:
        check_unreadable_by(user, files)
    assert str(err.value).startswith(f"HBGW_REDIS_TLS_KEY ({key}, mode {mode:04o}) can be read")
    assert "chmod 600" in str(err.value)
