"""Which address a webhook may dial: the endpoint's host resolved at each attempt, every address it
resolves to judged, and the one checked address the request is pinned to."""

from __future__ import annotations

import asyncio
import socket
from dataclasses import dataclass
from ipaddress import IPv4Address, IPv6Address, ip_address, ip_network
from typing import Final, Literal

from xjobs.factories.webhook_errors import WebhookAddressRefusedError, WebhookFailedError

AddressClass = Literal[
    "loopback",
    "private",
    "shared",
    "link-local",
    "metadata",
    "multicast",
    "unspecified",
    "reserved",
]
# What `allow_private=True` opens. Link-local (where cloud metadata services answer), the metadata
# addresses themselves, multicast, unspecified and reserved addresses are never dialled.
OPENED_BY_ALLOW_PRIVATE: Final[frozenset[AddressClass]] = frozenset(
    {"loopback", "private", "shared"}
)
PRIVATE_NETWORKS: Final = tuple(
    ip_network(n) for n in ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "fc00::/7")
)
SHARED_NETWORK: Final = ip_network("100.64.0.0/10")  # RFC 6598, carrier-grade NAT
NAT64_NETWORK: Final = ip_network("64:ff9b::/96")  # RFC 6052, the well-known NAT64 prefix
# Instance metadata services that sit outside link-local (AWS over IPv6, Alibaba Cloud).
METADATA_ADDRESSES: Final = frozenset(
    ip_address(a) for a in ("169.254.169.254", "fd00:ec2::254", "100.100.100.200")
)
DEFAULT_PORTS: Final = {"http": 80, "https": 443}

Address = IPv4Address | IPv6Address


def _embedded_v4(ip: IPv6Address) -> IPv4Address | None:
    """The IPv4 address a 6to4, IPv4-compatible (`::a.b.c.d`) or NAT64 address carries."""
    if ip.sixtofour is not None:
        return ip.sixtofour
    if ip in NAT64_NETWORK or (int(ip) >> 32 == 0 and int(ip) > 1):
        return IPv4Address(int(ip) & 0xFFFFFFFF)
    return None


def address_class(ip: Address) -> AddressClass | None:
    """The class that refuses `ip`, or `None` for a globally reachable address. An IPv4-mapped or
    NAT64 address is the IPv4 address it carries; a 6to4 or IPv4-compatible one is refused when
    the address it carries is; Teredo is refused (its client address is obscured)."""
    if isinstance(ip, IPv6Address):
        if ip.ipv4_mapped is not None:
            return address_class(ip.ipv4_mapped)
        if ip.teredo is not None:
            return "reserved"
        inner = _embedded_v4(ip)
        if inner is not None:
            found = address_class(inner)
            if found is not None or ip in NAT64_NETWORK:
                return found
    return _own_class(ip)


def _own_class(ip: Address) -> AddressClass | None:
    if ip in METADATA_ADDRESSES:
        return "metadata"
    if ip.is_multicast:
        return "multicast"
    if ip.is_unspecified:
        return "unspecified"
    if ip.is_loopback:
        return "loopback"
    if ip.is_link_local:
        return "link-local"
    if ip in SHARED_NETWORK:
        return "shared"
    if any(ip in net for net in PRIVATE_NETWORKS) or (
        isinstance(ip, IPv6Address) and ip.is_site_local
    ):
        return "private"
    if ip.is_reserved or not ip.is_global:
        return "reserved"
    return None


def judge(ip: Address, *, allow_private: bool) -> AddressClass | None:
    """The class that refuses `ip` under this declaration, or `None`: it may be dialled."""
    found = address_class(ip)
    if found is None or (allow_private and found in OPENED_BY_ALLOW_PRIVATE):
        return None
    return found


@dataclass(frozen=True, slots=True)
class Pinned:
    """The address one attempt dials, checked, for the host the endpoint's URL names."""

    host: str
    port: int
    address: Address


def _addresses(infos: list[tuple[object, ...]]) -> list[Address]:
    found: list[Address] = []
    for info in infos:
        sockaddr = info[4]
        assert isinstance(sockaddr, tuple)
        text = str(sockaddr[0]).partition("%")[0]  # an IPv6 zone id is not part of the address
        ip = ip_address(text)
        if ip not in found:
            found.append(ip)
    return found


async def pin(host: str, port: int, *, allow_private: bool) -> Pinned:
    """Resolve `host` off the event loop and answer the first address it resolves to, once EVERY
    address it resolves to may be dialled; `WebhookAddressRefusedError` (terminal) names the
    class of the first that may not, `WebhookFailedError` (retried) says the name did not
    resolve. A literal in any form the resolver reads (`0x7f000001`, `127.1`, `::ffff:…`) is
    judged as the address it reads as."""
    loop = asyncio.get_running_loop()
    try:
        infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError) as exc:
        raise WebhookFailedError(
            f"the endpoint's host {host!r:.100} did not resolve: {exc}"
        ) from None
    addresses = _addresses(list(infos))
    if not addresses:
        raise WebhookFailedError(f"the endpoint's host {host!r:.100} resolved to no address")
    for ip in addresses:
        refused = judge(ip, allow_private=allow_private)
        if refused is not None:
            # the address itself is not said: an org's ledger must not map the internal network
            hint = " (allow_private=True opens it)" if refused in OPENED_BY_ALLOW_PRIVATE else ""
            raise WebhookAddressRefusedError(
                f"the endpoint's host {host!r:.100} resolves to a {refused} address, "
                f"which a webhook never dials{hint}"
            )
    first = addresses[0]
    if isinstance(first, IPv6Address) and first.ipv4_mapped is not None:
        first = first.ipv4_mapped
    return Pinned(host, port, first)
