"""Which addresses the gateway's outbound webhooks may reach.

A tenant names a session's webhook URL, and the worker POSTs to it: without a rule it POSTed to
Flower's shutdown API on loopback, to Redis's port and to the cloud's metadata address, and the
runs view told the tenant which inside ports were open (issue 29). So every outbound webhook —
a session's own URL, HBGW_WEBHOOK_URL and HBGW_ALERT_WEBHOOK — refuses an address *inside*:
loopback, private (RFC 1918, 100.64/10), link-local, unique-local, multicast, unspecified,
reserved or broadcast, the IPv6 forms that carry one of those IPv4 addresses included, unless
the operator's allowlist (HBGW_WEBHOOK_ALLOW_NETWORKS: networks and host names) names it.

The same rule is checked twice: ``OutboundGuard.url_problem`` when a URL is set (its literal
address in any notation, or what its name resolves to then), and ``OutboundGuard.addresses``
when a connection is opened (``outbound_http.py``), on the very addresses connected to, so a
name that resolves inside only later (DNS rebinding) is refused too.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from urllib.parse import urlsplit

from hbgw.core.errors import OutboundRefused

Address = ipaddress.IPv4Address | ipaddress.IPv6Address
Network = ipaddress.IPv4Network | ipaddress.IPv6Network
# host, port -> the addresses a connection to them would try, as text (getaddrinfo's answer).
Resolver = Callable[[str, int], Sequence[str]]

ALLOW_SETTING = "HBGW_WEBHOOK_ALLOW_NETWORKS"
# The end of a refusal: a tenant asks the operator; the operator (a setting) allows it.
TENANT_REMEDY = f"Use a public address, or ask the operator to add it to {ALLOW_SETTING}."
OPERATOR_REMEDY = f"Use a public address, or add it to {ALLOW_SETTING} if you mean it."

# Listed rather than left to ``ipaddress.is_global``, whose answer changed between Python
# patch releases; each with the word a refusal uses for it.
_INSIDE: tuple[tuple[str, str], ...] = (
    ("0.0.0.0/8", "unspecified"),
    ("10.0.0.0/8", "private"),
    ("100.64.0.0/10", "private (carrier-grade NAT)"),
    ("127.0.0.0/8", "loopback"),
    ("169.254.0.0/16", "link-local"),
    ("172.16.0.0/12", "private"),
    ("192.0.0.0/24", "reserved"),
    ("192.0.2.0/24", "reserved"),
    ("192.168.0.0/16", "private"),
    ("198.18.0.0/15", "reserved"),
    ("198.51.100.0/24", "reserved"),
    ("203.0.113.0/24", "reserved"),
    ("224.0.0.0/4", "multicast"),
    ("240.0.0.0/4", "reserved"),  # 255.255.255.255, the broadcast address, included
    ("::/128", "unspecified"),
    ("::1/128", "loopback"),
    ("64:ff9b:1::/48", "reserved"),
    ("100::/64", "reserved"),
    ("2001::/23", "reserved"),
    ("2001:db8::/32", "reserved"),
    ("fc00::/7", "unique-local"),
    ("fe80::/10", "link-local"),
    ("fec0::/10", "site-local"),
    ("ff00::/8", "multicast"),
)
INSIDE_NETWORKS: tuple[tuple[Network, str], ...] = tuple(
    (ipaddress.ip_network(net), word) for net, word in _INSIDE
)
# IPv6 prefixes whose last 32 bits are an IPv4 address a packet ends up at: IPv4-compatible
# (::/96, deprecated) and NAT64 (64:ff9b::/96). IPv4-mapped and 6to4 have properties of their own.
_CARRIES_IPV4 = (ipaddress.ip_network("::/96"), ipaddress.ip_network("64:ff9b::/96"))


def carried_ipv4(address: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 address stands for (``::ffff:127.0.0.1``, ``::127.0.0.1``,
    ``64:ff9b::7f00:1``, ``2002:7f00:1::``), or None."""
    if address.ipv4_mapped is not None:
        return address.ipv4_mapped
    if address.sixtofour is not None:
        return address.sixtofour
    if any(address in net for net in _CARRIES_IPV4) and int(address) > 1:  # not :: or ::1
        return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    return None


def inside_kind(address: Address) -> str | None:
    """The word for why ``address`` is inside (``loopback``, ``private``, …); None: outside."""
    if isinstance(address, ipaddress.IPv6Address):
        carried = carried_ipv4(address)
        if carried is not None:
            return inside_kind(carried)
    for net, word in INSIDE_NETWORKS:
        if address.version == net.version and address in net:
            return word
    return None


def literal_address(host: str) -> Address | None:
    """The address ``host`` (a URL's host) spells, in any notation an OS accepts: dotted,
    shortened (``127.1``), hexadecimal (``0x7f.1``), octal (``0177.0.0.1``), one number
    (``2130706433``), bracketed IPv6, with a trailing dot; None for a name."""
    bare = host.strip("[]").rstrip(".")
    try:
        return ipaddress.ip_address(bare)
    except ValueError:
        pass
    if not bare or not all(c in "0123456789abcdefxABCDEFX." for c in bare):
        return None  # a name: inet_aton would read "cafe.example" as nothing, but say so here
    try:
        # What getaddrinfo does with a numeric host (glibc reads it with inet_aton).
        return ipaddress.IPv4Address(socket.inet_aton(bare))
    except OSError:
        return None


def host_name(host: str) -> str:
    """A host name as the allowlist compares it: lower case, without its trailing dot."""
    return host.strip("[]").rstrip(".").lower()


def is_localhost(name: str) -> bool:
    """``localhost`` and the names under it, loopback by definition (RFC 6761)."""
    return name == "localhost" or name.endswith(".localhost")


@dataclass(frozen=True)
class Allowlist:
    """The inside targets an operator means: networks, and host names trusted whatever they
    resolve to."""

    networks: tuple[Network, ...] = ()
    names: frozenset[str] = frozenset()

    def permits(self, address: Address) -> bool:
        if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
            address = address.ipv4_mapped
        return any(address.version == n.version and address in n for n in self.networks)


def parse_allowlist(text: str) -> Allowlist:
    """HBGW_WEBHOOK_ALLOW_NETWORKS: comma-separated networks (``10.0.5.0/24``, ``fd00::/8``),
    single addresses and host names; ``ValueError`` naming the first entry that is none."""
    networks: list[Network] = []
    names: set[str] = set()
    for raw in text.split(","):
        entry = raw.strip()
        if not entry:
            continue
        if "/" in entry or literal_address(entry) is not None or ":" in entry:
            try:
                networks.append(ipaddress.ip_network(entry.strip("[]"), strict=True))
            except ValueError as exc:
                raise ValueError(
                    f"{entry!r} is not a network ({exc}); write networks like "
                    "10.0.5.0/24 or fd00::/8, addresses like 10.0.5.7, or host names, "
                    "separated by commas"
                ) from None
            continue
        name = host_name(entry)
        labels = name.split(".")
        if not all(label and label.replace("-", "").isalnum() and label.isascii()
                   for label in labels):  # fmt: skip
            raise ValueError(
                f"{entry!r} is neither a network nor a host name; write "
                "networks like 10.0.5.0/24, addresses like 10.0.5.7, or host names like "
                "hooks.internal, separated by commas"
            )
        names.add(name)
    return Allowlist(tuple(networks), frozenset(names))


def system_resolver(host: str, port: int) -> list[str]:
    """The addresses the OS resolves ``host`` to for a TCP connection, in its order."""
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return [str(info[4][0]) for info in infos]


class OutboundGuard:
    """The outbound address rule with the operator's allowlist and a resolver."""

    def __init__(self, allow: Allowlist, resolve: Resolver = system_resolver) -> None:
        self.allow = allow
        self.resolve = resolve

    def refusal(
        self, address: Address, shown: str, remedy: str = TENANT_REMEDY, *, verb: str = "is"
    ) -> str | None:
        """The sentence refusing ``address`` (``shown`` ``verb`` it); None when allowed."""
        kind = inside_kind(address)
        if kind is None or self.allow.permits(address):
            return None
        article = "an" if kind[0] in "aeiou" else "a"
        return (
            f"{shown} {verb} {article} {kind} address, inside the gateway's own network: "
            f"webhooks are not sent there. {remedy}"
        )

    def url_problem(self, url: str, remedy: str = TENANT_REMEDY) -> str | None:
        """Set time: None when ``url``'s host may be POSTed to; else the sentence saying why not
        (ending in ``remedy``). A name that does not resolve now is left to connect time."""
        try:
            host = host_name(urlsplit(url).hostname or "")
        except ValueError:  # not a URL: the syntax check (webhook_url.py) says so
            return None
        if host in self.allow.names:
            return None
        shown = f"The webhook URL's host {host}"
        literal = literal_address(host)
        if literal is not None:
            return self.refusal(literal, shown, remedy)
        if is_localhost(host):
            return self.refusal(ipaddress.IPv4Address("127.0.0.1"), shown, remedy)
        try:
            found = self.resolve(host, 443)
        except (OSError, UnicodeError):  # no answer now; connecting will look again
            return None
        for text in found:
            problem = self.refusal(ipaddress.ip_address(text), shown, remedy, verb="resolves to")
            if problem is not None:
                return problem
        return None

    def addresses(self, host: str, port: int) -> list[str]:
        """Connect time: the addresses of ``host`` a connection may try, in order;
        ``OutboundRefused`` when none is allowed."""
        name = host_name(host)
        literal = literal_address(name)
        found = [str(literal)] if literal is not None else list(self.resolve(name, port))
        if name in self.allow.names and literal is None:
            return found
        allowed: list[str] = []
        refused: str | None = None
        for text in found:
            # Read in the operator's log (the tenant sees a reference): the operator's remedy.
            problem = self.refusal(ipaddress.ip_address(text), f"{name} ({text})", OPERATOR_REMEDY)
            if problem is None:
                allowed.append(text)
            else:
                refused = refused or problem
        if not allowed:
            raise OutboundRefused(refused or f"{name} resolves to no address.")
        return allowed
