"""The broker's and the delivery retries' settings, parts of ``Settings`` kept in a module of
their own (like each platform's, ``settings_<platform>.py``) so that ``settings.py`` stays
readable: read from the environment, masked and spelled out for children like any other."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field, model_validator

# The state Redis may be a Redis Cluster (``state.cluster``); kombu has no cluster transport.
CLUSTER_SCHEMES = ("redis+cluster://", "rediss+cluster://")


class BrokerSettings(BaseModel):
    broker_url: str | None = Field(
        default=None,
        description="Celery's broker (redis://, rediss://, sentinel://, amqp://, amqps://); unset "
        "means the state Redis of HBGW_REDIS_URL (required when that is a Redis Cluster).",
    )
    broker_quorum: bool = Field(
        default=True,
        description="RabbitMQ broker: declare the gateway's queues as quorum queues "
        "(replicated); off for classic queues.",
    )
    broker_tls_ca: Path | None = Field(
        default=None,
        description="PEM file of the CA that signed the RabbitMQ broker's certificate "
        "(amqps://); unset means the system's CAs. The certificate is always verified.",
    )

    @model_validator(mode="after")
    def _broker_is_not_a_cluster(self) -> Any:
        state = str(getattr(self, "redis_url", None) or "").lower()
        broker = (self.broker_url or "").lower()
        if broker.startswith(CLUSTER_SCHEMES) or (not broker and state.startswith(CLUSTER_SCHEMES)):
            raise ValueError(
                "a Redis Cluster cannot be Celery's broker (kombu has no cluster transport): "
                "keep the state on the cluster (HBGW_REDIS_URL) and set HBGW_BROKER_URL to a "
                "standalone Redis, Sentinel or RabbitMQ"
            )
        return self


class DeliverySettings(BaseModel):
    delivery_retries: int = Field(
        default=5,
        ge=0,
        le=50,
        description="Times a delivery that failed for now (5xx, timeout) is sent again.",
    )
    delivery_backoff: float = Field(
        default=10.0, ge=0, description="Seconds before a delivery's first retry; doubles after."
    )
    delivery_backoff_max: float = Field(
        default=600.0, ge=0, description="Longest wait between two retries of a delivery, seconds."
    )
