"""Celery's broker, apart from the state when HBGW_BROKER_URL says so.

The state (due index, locks, inboxes, registries) always lives in the Redis of HBGW_REDIS_URL.
The broker carries only Celery's messages: the fires beat sends each worker, the drains, and
Celery's own events and control messages. By default it is that same Redis; HBGW_BROKER_URL
moves it to another Redis (``redis://``, ``rediss://``, ``sentinel://``) or to RabbitMQ (``amqp://``,
``amqps://``), so that the broker and the state can be sized, replicated and restarted apart.

What each kind needs so that several deployments share one server without meeting:

* Redis: every broker key under ``<namespace>:celery:`` (kombu's ``global_keyprefix``), and a
  visibility timeout for messages a worker took and never acknowledged.
* RabbitMQ: every queue the gateway declares is named after the namespace already; the
  control and event exchanges (``celery.pidbox``, ``celeryev`` by default, shared by every
  Celery app on the vhost) are named after it too. Queues are quorum queues unless
  HBGW_BROKER_QUORUM is off: replicated, and they survive a node's restart with what they hold.
  A message a worker took is redelivered when its connection closes (acks late), so no
  visibility timeout applies.
"""

from __future__ import annotations

import ssl
from typing import Any, Literal
from urllib.parse import urlsplit

from hbgw.core.errors import BadInput
from hbgw.core.settings import Settings, mask_url
from hbgw.state.redis_tls import tls_options
from hbgw.state.sentinel import is_sentinel, kombu_url

BrokerKind = Literal["redis", "amqp"]
KINDS: dict[str, BrokerKind] = {
    "redis": "redis",
    "rediss": "redis",
    "sentinel": "redis",
    "amqp": "amqp",
    "amqps": "amqp",
    "pyamqp": "amqp",
}
# A message a Redis consumer took and never acknowledged is handed out again after this long.
REDIS_VISIBILITY_TIMEOUT = 3600


def broker_url(settings: Settings, state_url: str) -> str:
    """HBGW_BROKER_URL, else the state's Redis; a ``sentinel://`` URL in kombu's own form."""
    url = settings.broker_url or state_url
    return kombu_url(url)[0] if is_sentinel(url) else url


def redis_urls(settings: Settings, state_url: str) -> list[str]:
    """The Redis servers a role uses: the state's, and the broker's when it is another Redis
    (each must run ``noeviction``: ``state/eviction.py``)."""
    broker = settings.broker_url
    if broker and broker != state_url and broker_kind(broker) == "redis":
        return [state_url, broker]
    return [state_url]


def broker_kind(url: str) -> BrokerKind:
    scheme = urlsplit(url).scheme.lower()
    kind = KINDS.get(scheme)
    if kind is None:
        raise BadInput(
            f"HBGW_BROKER_URL {mask_url(url)} has the scheme {scheme or '(none)'!r}; the broker "
            "is Redis (redis://, rediss://, sentinel://) or RabbitMQ (amqp://, amqps://)."
        )
    return kind


def broker_conf(settings: Settings, url: str) -> dict[str, Any]:
    """The Celery settings that depend on the broker (``url``: as the settings give it)."""
    if broker_kind(url) == "redis":
        conf: dict[str, Any] = {
            "broker_transport_options": {
                "visibility_timeout": REDIS_VISIBILITY_TIMEOUT,
                # Keeps several deployments (and parallel tests) apart on one Redis.
                "global_keyprefix": f"{settings.namespace}:celery:",
                **(kombu_url(url)[1] if is_sentinel(url) else {}),
            }
        }
        if urlsplit(url).scheme.lower() == "rediss":
            # kombu turns a bare rediss:// into "no certificate check" and would send AUTH to
            # any server; the gateway's own options make it verify (Flower reads them too).
            conf["broker_use_ssl"] = tls_options(settings, url)
        return conf
    conf = {
        "control_exchange": f"{settings.namespace}.control",
        "event_exchange": f"{settings.namespace}.events",
        "task_create_missing_queue_type": "quorum" if settings.broker_quorum else "classic",
    }
    if urlsplit(url).scheme.lower() == "amqps":
        conf["broker_use_ssl"] = amqp_tls(settings)
    return conf


def amqp_tls(settings: Settings) -> dict[str, Any]:
    """py-amqp's SSL options: the server's certificate is always verified (against
    HBGW_BROKER_TLS_CA, else the system's CAs), before the password is sent."""
    options: dict[str, Any] = {"cert_reqs": ssl.CERT_REQUIRED}
    if settings.broker_tls_ca is not None:
        if not settings.broker_tls_ca.is_file():
            raise BadInput(
                f"HBGW_BROKER_TLS_CA={settings.broker_tls_ca} is not a readable file: give the "
                "path of a PEM file."
            )
        options["ca_certs"] = str(settings.broker_tls_ca)
    return options
