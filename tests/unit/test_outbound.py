"""Issue 29, finding 2: outbound webhooks reached the inside of the gateway's network.

A tenant set ``PUT /v1/sessions/{id}/webhook`` to ``http://127.0.0.1:<flower>/api/worker/
shutdown/…`` and the worker POSTed there; ``2130706433``, ``0x7f.1``, ``127.1``, ``[::1]``,
``[::ffff:127.0.0.1]``, ``localhost`` and ``0.0.0.0`` were reached, ``169.254.169.254`` stored.
These tests pin the rule (``hbgw/core/outbound.py``) on every notation, when a URL is set and
at connect time on the address connected to (a resolver handed in: no DNS here), the
operator's allowlist (HBGW_WEBHOOK_ALLOW_NETWORKS) and the settings' start-time checks.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import httpcore
import pytest
from pydantic import ValidationError

from hbgw.core.errors import OutboundRefused
from hbgw.core.outbound import Allowlist, OutboundGuard, Resolver, parse_allowlist
from hbgw.core.outbound_http import GuardedBackend
from hbgw.core.settings import Settings

# Every notation of an inside address the attack used, and the other inside kinds.
INSIDE_HOSTS = (
    "127.0.0.1",
    "2130706433",  # one number
    "0x7f.1",  # hexadecimal, shortened
    "127.1",  # shortened
    "0177.0.0.1",  # octal
    "127.0.0.1.",  # trailing dot
    "[::1]",
    "[::ffff:127.0.0.1]",  # IPv4-mapped
    "[::ffff:7f00:1]",
    "[::127.0.0.1]",  # IPv4-compatible
    "[64:ff9b::a9fe:a9fe]",  # NAT64 of 169.254.169.254
    "[2002:7f00:1::]",  # 6to4 of 127.0.0.1
    "localhost",
    "localhost.",
    "LOCALHOST",
    "api.localhost",
    "0.0.0.0",
    "[::]",
    "169.254.169.254",  # the cloud's metadata service
    "10.1.2.3",
    "172.16.0.1",
    "192.168.1.1",
    "100.64.0.1",  # carrier-grade NAT
    "[fe80::1]",
    "[fd00::1]",
    "224.0.0.1",
    "[ff02::1]",
    "240.0.0.1",
    "255.255.255.255",
)
OUTSIDE_HOSTS = ("8.8.8.8", "[2606:4700:4700::1111]", "[::ffff:8.8.8.8]", "1.1.1.1:8443")


def no_dns(host: str, port: int) -> list[str]:
    raise AssertionError(f"a literal address or localhost was looked up in DNS: {host}")


def dns(answers: dict[str, Sequence[str]]) -> Resolver:
    def resolve(host: str, port: int) -> list[str]:
        if host not in answers:
            raise OSError(f"{host}: name not known")
        return list(answers[host])

    return resolve


NOTHING = OutboundGuard(Allowlist(), no_dns)


@pytest.mark.parametrize("host", INSIDE_HOSTS)
def test_every_notation_of_an_inside_address_is_refused_when_set(host: str) -> None:
    problem = NOTHING.url_problem(f"http://{host}:5555/api/worker/shutdown/w1")
    assert problem is not None
    assert (
        "inside the gateway's own network" in problem and "HBGW_WEBHOOK_ALLOW_NETWORKS" in problem
    )


@pytest.mark.parametrize("host", INSIDE_HOSTS)
def test_every_notation_of_an_inside_address_is_refused_at_connect_time(host: str) -> None:
    bare = host.strip("[]")
    answers: dict[str, Sequence[str]] = {
        "localhost": ["127.0.0.1", "::1"],
        "api.localhost": ["127.0.0.1"],
    }
    guard = OutboundGuard(Allowlist(), dns(answers))
    with pytest.raises(OutboundRefused, match="inside the gateway's own network"):
        guard.addresses(bare, 80)


@pytest.mark.parametrize("host", OUTSIDE_HOSTS)
def test_public_addresses_are_allowed(host: str) -> None:
    assert NOTHING.url_problem(f"https://{host}/hooks") is None


def test_a_name_that_resolves_inside_when_set_is_refused() -> None:
    guard = OutboundGuard(
        Allowlist(),
        dns({"hooks.inside.test": ["203.0.113.9", "10.0.0.5"], "hooks.public.test": ["8.8.4.4"]}),
    )
    problem = guard.url_problem("https://hooks.inside.test/in")
    assert problem is not None and "resolves to" in problem and "10.0.0.5" not in problem
    assert guard.url_problem("https://hooks.public.test/in") is None
    # A name that does not resolve now is left to the check at connect time.
    assert guard.url_problem("https://nowhere.test/in") is None


def test_a_name_that_re_resolves_inside_is_refused_at_connect_time() -> None:
    """DNS rebinding: outside when the URL was set, inside when the worker connects."""
    answers: dict[str, Sequence[str]] = {"rebind.test": ["8.8.8.8"]}
    guard = OutboundGuard(Allowlist(), dns(answers))
    assert guard.url_problem("https://rebind.test/hook") is None
    answers["rebind.test"] = ["127.0.0.1"]
    with pytest.raises(OutboundRefused, match=r"rebind.test \(127.0.0.1\) is a loopback address"):
        guard.addresses("rebind.test", 443)
    # Of a mixed answer only the outside addresses are connected to.
    answers["rebind.test"] = ["127.0.0.1", "8.8.8.8", "::1", "2606:4700:4700::1111"]
    assert guard.addresses("rebind.test", 443) == ["8.8.8.8", "2606:4700:4700::1111"]


def test_the_allowlist_lets_the_operators_inside_targets_through() -> None:
    allow = parse_allowlist(" 10.0.5.0/24, fd00::/8 ,127.0.0.1, hooks.internal. ")
    guard = OutboundGuard(
        allow, dns({"hooks.internal": ["10.9.9.9"], "other.internal": ["10.9.9.9"]})
    )
    allowed = ("10.0.5.7", "[fd00::5]", "127.0.0.1", "[::ffff:127.0.0.1]", "localhost")
    for host in (*allowed, "hooks.internal"):
        assert guard.url_problem(f"http://{host}/hook") is None, host
    for host in ("10.0.6.1", "127.0.0.2", "[::1]", "other.internal"):
        assert guard.url_problem(f"http://{host}/hook") is not None, host
    assert guard.addresses("127.0.0.1", 80) == ["127.0.0.1"]
    assert guard.addresses("HOOKS.internal.", 80) == ["10.9.9.9"]  # a name trusted as named
    with pytest.raises(OutboundRefused):
        guard.addresses("other.internal", 80)


@pytest.mark.parametrize(
    ("entry", "said"),
    [
        ("10.0.5.1/24", "'10.0.5.1/24' is not a network (10.0.5.1/24 has host bits set)"),
        ("10.0.0.0/33", "'10.0.0.0/33' is not a network"),
        ("fd00::/200", "'fd00::/200' is not a network"),
        ("hooks internal", "'hooks internal' is neither a network nor a host name"),
        ("http://hooks.internal", "'http://hooks.internal' is not a network"),
    ],
)
def test_a_bad_allowlist_entry_stops_the_start_naming_it(entry: str, said: str) -> None:
    with pytest.raises(ValidationError) as failed:
        Settings(webhook_allow_networks=f"10.0.5.0/24,{entry}")
    [error] = failed.value.errors()
    # The command line names the variable from the field (``HBGW_… is not valid: …``).
    assert error["loc"] == ("webhook_allow_networks",) and said in error["msg"]


@pytest.mark.parametrize("setting", ["webhook_url", "alert_webhook"])
def test_the_operators_webhooks_follow_the_same_rule_at_start(setting: str) -> None:
    name = f"HBGW_{setting.upper()}"
    for url in ("http://127.1:5555/hook", "http://localhost/hook", "http://[::1]/x"):
        refused: dict[str, Any] = {setting: url}
        with pytest.raises(ValidationError, match=f"{name}: The webhook URL's host"):
            Settings(**refused)
    allowed: dict[str, Any] = {
        setting: "http://127.0.0.1:9/hook",
        "webhook_allow_networks": "127.0.0.0/8",
    }
    assert Settings(**allowed).outbound_allowlist.networks
    # A name is not looked up at start (every command reads the settings): at connect time.
    named: dict[str, Any] = {setting: "https://hooks.example/T0/B0"}
    Settings(**named)


class FakeStream(httpcore.NetworkStream):
    def __init__(self, address: str) -> None:
        self.address = address


class FakeBackend(httpcore.NetworkBackend):
    """Records where connections go; a socket is not opened in the unit tier."""

    def __init__(self, failing: Iterable[str] = ()) -> None:
        self.tried: list[str] = []
        self.failing = set(failing)

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.NetworkStream:
        self.tried.append(host)
        if host in self.failing:
            raise httpcore.ConnectError(f"{host} refused")
        return FakeStream(host)


def test_the_backend_connects_to_the_checked_address_only() -> None:
    answers: dict[str, Sequence[str]] = {"hooks.test": ["127.0.0.1", "8.8.8.8", "9.9.9.9"]}
    inner = FakeBackend(failing={"8.8.8.8"})
    backend = GuardedBackend(OutboundGuard(Allowlist(), dns(answers)), inner)
    stream = backend.connect_tcp("hooks.test", 443)
    # Never the loopback address; the next allowed one after a refused connection.
    assert inner.tried == ["8.8.8.8", "9.9.9.9"] and isinstance(stream, FakeStream)
    answers["hooks.test"] = ["8.8.8.8"]
    with pytest.raises(httpcore.ConnectError, match=r"8\.8\.8\.8 refused"):
        backend.connect_tcp("hooks.test", 443)
    answers["hooks.test"] = ["169.254.169.254"]
    inner.tried.clear()
    with pytest.raises(OutboundRefused):
        backend.connect_tcp("hooks.test", 443)
    assert inner.tried == []  # refused before any connection
    # A name that does not resolve fails as httpcore's own connection error (httpx maps it).
    with pytest.raises(httpcore.ConnectError, match="name not known"):
        backend.connect_tcp("gone.test", 443)
    with pytest.raises(OutboundRefused, match="local sockets"):
        backend.connect_unix_socket("/run/redis.sock")
