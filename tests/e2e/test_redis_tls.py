"""Issue 15: every connection to a ``rediss://`` Redis verifies the server's certificate.

A real TLS redis-server with AUTH and a CA made by the test: a real worker, beat and API work
over it. An impostor with a certificate of another CA: every role refuses with a sentence, and
the impostor receives nothing (kombu, Celery's broker client, used to send it AUTH).
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import redis
from support.api_fixtures import ADMIN_TOKEN, api_overrides
from support.harness import Gateway, gateway_settings, wait_until
from support.tls_redis import PASSWORD, Impostor, Pki, free_port, make_pki, tls_redis_server

from hbgw.celery_app import make_celery
from hbgw.core.errors import BadInput
from hbgw.core.settings import Settings
from hbgw.procs import settings_env, spawn_hbgw, stop_all
from hbgw.sessions.states import RunState
from hbgw.state.connection import connect, refuse_unverified_redis
from hbgw.state.redis_tls import RedisTlsError

pytestmark = pytest.mark.timeout(240)


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("pki-good"), "gateway test")


@pytest.fixture(scope="module")
def other_pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("pki-other"), "impostor")


@pytest.fixture
def impostor(other_pki: Pki) -> Iterator[Impostor]:
    with Impostor(other_pki) as server:
        yield server


def test_celery_broker_connection_refuses_an_impostor_before_auth(
    tmp_path: Path, pki: Pki, impostor: Impostor
) -> None:
    settings = Settings(home=tmp_path, redis_url=impostor.url(), redis_tls_ca=pki.ca)
    app = make_celery(settings, impostor.url())
    with app.connection_for_write() as conn, pytest.raises(Exception, match="CERTIFICATE_VERIFY"):
        conn.ensure_connection(max_retries=1)
    client = connect(impostor.url(), settings)
    with pytest.raises(Exception, match="CERTIFICATE_VERIFY"):
        client.ping()
    client.close()
    with pytest.raises(RedisTlsError, match="does not verify against the CA in HBGW_REDIS_TLS_CA"):
        refuse_unverified_redis(settings, impostor.url())
    assert PASSWORD.encode() not in impostor.received
    assert impostor.received == b""


def test_a_url_that_turns_checks_off_is_refused(tmp_path: Path) -> None:
    url = "rediss://:pw@127.0.0.1:1/0?ssl_cert_reqs=none"
    with pytest.raises(BadInput, match="always verifies"):
        make_celery(Settings(home=tmp_path, redis_url=url), url)
    with pytest.raises(BadInput, match="always verifies"):
        connect(url)


def test_a_client_certificate_needs_its_key(tmp_path: Path, pki: Pki) -> None:
    with pytest.raises(ValueError, match="HBGW_REDIS_TLS_CERT and HBGW_REDIS_TLS_KEY together"):
        Settings(home=tmp_path, redis_tls_cert=pki.cert)
    with pytest.raises(BadInput, match=r"HBGW_REDIS_TLS_CA=.* is not a readable file"):
        connect("rediss://127.0.0.1:1/0", Settings(home=tmp_path, redis_tls_ca=tmp_path / "no"))


ROLES = {
    "worker": ["worker", "--name", "w1"],
    "beat": ["beat"],
    "api": ["api", "--port", "0"],
    "flower": ["flower", "--unauthenticated-loopback", "--port", str(free_port())],
}


def test_every_role_refuses_an_impostor_with_a_sentence(
    tmp_path: Path, pki: Pki, impostor: Impostor
) -> None:
    settings = Settings(home=tmp_path, redis_url=impostor.url(), redis_tls_ca=pki.ca)
    env = settings_env(settings)
    procs = {
        role: subprocess.Popen(
            [*_hbgw(), *args], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
        )
        for role, args in ROLES.items()
    }
    try:
        for role, proc in procs.items():
            output, _ = proc.communicate(timeout=120)
            text = output.decode()
            assert proc.returncode == 1, (role, text)
            assert "Refusing Redis at rediss://:********@127.0.0.1" in text, (role, text)
            assert "does not verify against the CA in HBGW_REDIS_TLS_CA" in text, (role, text)
            assert PASSWORD not in text, role
    finally:
        stop_all(list(procs.values()))
    assert impostor.received == b"", "a role sent data (AUTH) to a server it could not verify"


def _hbgw() -> list[str]:
    import sys

    return [sys.executable, "-m", "hbgw"]


def test_worker_beat_api_and_flower_work_end_to_end_over_tls_with_auth(
    tmp_path: Path, pki: Pki
) -> None:
    with tls_redis_server(tmp_path, pki) as admin_url:
        # The roles log in as an ACL user limited to the namespace's keys, as operations.md
        # suggests: the test shows that this is enough for every role.
        url = _acl_user(admin_url, pki, namespace="tls")
        settings = gateway_settings(
            tmp_path, url, "tls", agent="echo", redis_tls_ca=pki.ca, **api_overrides()
        )
        gw = Gateway(settings, url)
        port = free_port()
        env = settings_env(settings, admin_token=ADMIN_TOKEN)  # secrets are not spelled out
        flower_port = free_port()
        roles = [
            ["worker", "--name", "w1"],
            ["beat"],
            ["api", "--port", str(port)],
            ["flower", "--unauthenticated-loopback", "--port", str(flower_port)],
        ]
        procs = [
            spawn_hbgw(args, env=env, log=tmp_path / f"role{i}.log") for i, args in enumerate(roles)
        ]
        try:
            wait_until(lambda: gw.rt.registry.live(gw.rt.now_ms()) == ["w1"], 90, "the worker")
            heartbeat = gw.session(chat="HB")
            gw.due_now(heartbeat, seconds=1)
            with httpx.Client(
                base_url=f"http://127.0.0.1:{port}",
                headers={"Authorization": f"Bearer {ADMIN_TOKEN}"},
                timeout=10,
            ) as api:
                wait_until(lambda: _answers(api), 60, "the API to listen")
                _message_is_answered(api)
            _flower_reads_the_broker(flower_port)
            wait_until(
                lambda: any(r.state == RunState.COMPLETED for r in gw.runs(heartbeat)),
                60,
                "a heartbeat to fire and complete over TLS",
            )
        finally:
            stop_all(procs)
            gw.close()
    # The ACL user is enough for every role: no command was refused (a refused PUBLISH once
    # restarted the worker's consumer every 10 s, and the test passed or not by luck).
    for i in range(len(roles)):
        assert "NoPermissionError" not in (tmp_path / f"role{i}.log").read_text(), f"role {i}"


def _acl_user(admin_url: str, pki: Pki, *, namespace: str) -> str:
    admin = redis.Redis.from_url(admin_url, ssl_ca_certs=str(pki.ca))
    try:
        admin.acl_setuser(
            "gw",
            enabled=True,
            passwords=["+gw-acl-pass"],
            keys=[f"~{namespace}:*"],
            # redis-py writes the "&" itself: "*" is ACL's "&*", every pub/sub channel (Celery's
            # events and broadcasts); "&*" here would allow only a channel named "&*".
            channels=["*"],
            commands=["+@all"],
        )
    finally:
        admin.close()
    return admin_url.replace(f":{PASSWORD}@", ":gw-acl-pass@").replace("rediss://", "rediss://gw")


def _flower_reads_the_broker(port: int) -> None:
    """Flower's own Redis client (queue lengths) uses the same TLS options as Celery's."""
    with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=10) as flower:
        wait_until(lambda: _answers(flower, "/healthcheck"), 60, "Flower to listen")
        answer = flower.get("/api/queues/length")
        assert answer.status_code == 200, answer.text
        assert "tls.default" in {q["name"] for q in answer.json()["active_queues"]}


def _answers(api: httpx.Client, path: str = "/healthz") -> bool:
    try:
        return api.get(path).status_code == 200
    except httpx.HTTPError:
        return False


def _message_is_answered(api: httpx.Client) -> None:
    created = api.post("/v1/sessions", json={"platform": "slack", "chat": "C1", "thread": "T1"})
    assert created.status_code == 201, created.text
    sid = created.json()["id"]
    sent = api.post(f"/v1/sessions/{sid}/messages", json={"text": "hello over TLS"})
    assert sent.status_code == 202 and sent.json()["handed_off"], sent.text

    def answered() -> bool:
        messages = api.get(f"/v1/sessions/{sid}/messages").json()["messages"]
        return any(m["role"] == "assistant" for m in messages)

    wait_until(answered, 60, "the message to be answered over TLS")
