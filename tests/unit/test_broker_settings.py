"""HBGW_BROKER_URL: which broker Celery uses, and what each kind is configured with."""

from __future__ import annotations

import ssl
from pathlib import Path

import pytest

from hbgw.broker import broker_conf, broker_kind, broker_url
from hbgw.celery_app import make_celery
from hbgw.core.errors import BadInput
from hbgw.core.settings import Settings

STATE = "redis://127.0.0.1:6379/0"


def test_unset_means_the_state_redis() -> None:
    assert broker_url(Settings(), STATE) == STATE
    app = make_celery(Settings(namespace="n1"), STATE)
    assert app.conf.broker_url == STATE
    assert app.conf.broker_transport_options["global_keyprefix"] == "n1:celery:"


def test_rabbitmq_gets_namespaced_exchanges_and_quorum_queues() -> None:
    settings = Settings(namespace="n1", broker_url="amqp://guest:guest@127.0.0.1:5672//")
    app = make_celery(settings, STATE)
    assert app.conf.broker_url == settings.broker_url
    assert app.conf.control_exchange == "n1.control"
    assert app.conf.event_exchange == "n1.events"
    assert app.conf.task_create_missing_queue_type == "quorum"
    assert "global_keyprefix" not in (app.conf.broker_transport_options or {})
    off = Settings(namespace="n1", broker_url=settings.broker_url, broker_quorum=False)
    assert broker_conf(off, str(off.broker_url))["task_create_missing_queue_type"] == "classic"


def test_amqps_always_verifies_the_certificate(tmp_path: Path) -> None:
    url = "amqps://u:p@mq.example:5671//"
    assert broker_conf(Settings(broker_url=url), url)["broker_use_ssl"] == {
        "cert_reqs": ssl.CERT_REQUIRED
    }
    ca = tmp_path / "ca.pem"
    ca.write_text("-----BEGIN CERTIFICATE-----\n")
    options = broker_conf(Settings(broker_url=url, broker_tls_ca=ca), url)["broker_use_ssl"]
    assert options == {"cert_reqs": ssl.CERT_REQUIRED, "ca_certs": str(ca)}
    with pytest.raises(BadInput, match=r"HBGW_BROKER_TLS_CA=.* is not a readable file"):
        broker_conf(Settings(broker_url=url, broker_tls_ca=tmp_path / "none.pem"), url)


def test_a_separate_tls_redis_broker_verifies_too() -> None:
    url = "rediss://:pw@cache.example:6380/0"
    options = broker_conf(Settings(broker_url=url), url)["broker_use_ssl"]
    assert options["ssl_cert_reqs"] == ssl.CERT_REQUIRED


@pytest.mark.parametrize("url", ["kafka://k:9092", "sqs://", "127.0.0.1:5672"])
def test_an_unknown_broker_is_refused_with_a_sentence(url: str) -> None:
    with pytest.raises(BadInput, match=r"the broker is Redis .* or RabbitMQ") as caught:
        broker_kind(url)
    assert "HBGW_BROKER_URL" in str(caught.value)


def test_the_password_of_a_refused_url_is_not_shown() -> None:
    with pytest.raises(BadInput) as caught:
        make_celery(Settings(broker_url="kafka://user:hunter2@k:9092"), STATE)
    assert "hunter2" not in str(caught.value)
