"""Reading Prometheus ``/metrics`` pages of real processes, and free loopback ports for them."""

from __future__ import annotations

import socket

import httpx
from prometheus_client.parser import text_string_to_metric_families

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def free_port_run(count: int) -> int:
    """The first of ``count`` consecutive loopback ports that are free now."""
    for _ in range(100):
        base = free_port()
        if base + count <= 65535 and all(_free(base + i) for i in range(1, count)):
            return base
    raise AssertionError(f"no {count} consecutive free ports")


def _free(port: int) -> bool:
    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def scrape(url: str) -> Samples:
    """Every sample of the page, keyed by (sample name, sorted labels); {} while nobody answers."""
    try:
        text = httpx.get(url, timeout=5).text
    except httpx.HTTPError:
        return {}
    samples: Samples = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return samples


def value(samples: Samples, name: str, **labels: str) -> float | None:
    return samples.get((name, tuple(sorted(labels.items()))))


def with_name(samples: Samples, name: str) -> dict[tuple[tuple[str, str], ...], float]:
    """The samples called ``name``, by their labels."""
    return {labels: v for (n, labels), v in samples.items() if n == name}
