"""The chaos run's tenant check (issue 29's high findings, tried during the run), fed
constructed evidence: every attempt refused and nothing stored passes; an attempt the API took,
a session stored for the tenant, a secret in a delivered text, or a tenant that never ran fails.
The evidence, tenant records included, survives the round trip through ``evidence.json``."""

from __future__ import annotations

import json
from pathlib import Path

from chaos import recheck
from chaos.checks import tenant_kept_out
from chaos.collect import delivered_leaks
from chaos.evidence import Attempt, Evidence, TenantSession
from chaos.tenant import PROBE, Tenant

ROUTE = "http://127.0.0.2:9000/hooks/chaos"
CONTROL = TenantSession("s-control", "webhook", "partner", ROUTE)


def refused(name: str) -> Attempt:
    return Attempt(name, 403, "Owner mallory may not open a slack session on chat C0VICTIM.", True)


def evidence(**kw: object) -> Evidence:
    values: dict[str, object] = {
        "attempts": [refused("slack session on C0VICTIM")],
        "tenant_sessions": [CONTROL],
        "tenant_control": CONTROL.id,
        "tenant_route": ROUTE,
        **kw,
    }
    return Evidence(**values)  # type: ignore[arg-type]


def test_every_attempt_refused_and_nothing_stored_passes() -> None:
    check = tenant_kept_out(evidence())
    assert check.ok, check.failures
    assert check.figures == {"attempts": 1, "refused": 1, "leaks": 0}


def test_an_attempt_the_api_took_fails() -> None:
    taken = Attempt("webhook session to http://127.1:6379/", 201, "", False)
    check = tenant_kept_out(evidence(attempts=[refused("a"), taken]))
    assert check.failures == [
        "not refused: webhook session to http://127.1:6379/ answered 201 ('')"
    ]


def test_a_session_stored_for_the_tenant_fails_and_so_does_a_moved_route() -> None:
    stray = TenantSession("s-stray", "slack", "C0VICTIM")
    moved = TenantSession(CONTROL.id, "webhook", "partner", "http://[::1]:6379/")
    check = tenant_kept_out(evidence(tenant_sessions=[stray, moved]))
    assert check.failures == [
        "stored for the tenant: slack session s-stray on 'C0VICTIM'",
        "stored for the tenant: webhook session s-control on 'partner' posting to "
        "http://[::1]:6379/",
    ]


def test_a_secret_in_a_delivered_text_fails_and_a_tenant_that_never_ran_fails() -> None:
    assert not tenant_kept_out(evidence(leaks=["s1: the Redis password"])).ok
    assert tenant_kept_out(evidence(attempts=[])).failures == [
        "the tenant never ran: no attempt recorded"
    ]


def test_leaks_are_found_by_value_and_named_without_it(tmp_path: Path) -> None:
    channel = tmp_path / "deliveries.jsonl"
    lines = [
        {"call": "send", "session_id": "s1", "text": "echo: hello"},
        {"call": "send", "session_id": "s2", "text": "echo: hi\nHBGW_REDIS_URL=redis://:pw-42@x"},
    ]
    channel.write_text("".join(json.dumps(line) + "\n" for line in lines))
    found = delivered_leaks(channel, {"an HBGW_ variable": "HBGW_", "the password": "pw-42"})
    assert found == ["s2: an HBGW_ variable", "s2: the password"]
    assert delivered_leaks(tmp_path / "absent.jsonl", {"x": "y"}) == []


def test_the_tenant_records_survive_evidence_json(tmp_path: Path) -> None:
    path = tmp_path / "evidence.json"
    recheck.save(evidence(leaks=["s1: x"]), path)
    again = recheck.load(path)
    assert again.attempts == evidence().attempts and again.tenant_sessions == [CONTROL]
    assert again.tenant_control == CONTROL.id and again.leaks == ["s1: x"]


def test_the_tenant_writes_loopback_in_every_notation_and_the_probe_reads_the_worker() -> None:
    tenant = Tenant("http://127.0.0.1:1", "t" * 32, ROUTE, (6379,))
    urls = tenant.inside_urls()
    for written in ("127.0.0.1", "2130706433", "0x7f.1", "127.1", "[::1]", "[::ffff:127.0.0.1]"):
        assert f"http://{written}:6379/" in urls
    assert "http://169.254.169.254/latest/meta-data/" in urls
    assert "/proc/$PPID/environ" in PROBE and "echo: " in PROBE
    assert tenant.api_env()["HBGW_OWNER_CHATS"] == "mallory=webhook:partner"
