"""The Host names a dashboard answers: loopback names always, the `allowed_hosts` it is given, and
no other, so a page that rebinds its own DNS name to the dashboard's address (DNS rebinding) is
answered 400 and reads nothing."""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable
from dataclasses import dataclass

from xjobs_web.errors import DashboardOptionInvalidError

ANY = "*"
LOOPBACK_NAMES = ("localhost", "127.0.0.1", "[::1]")
# a DNS name or an IPv4 address, or a bracketed IPv6 address; then an optional port
_HOST = re.compile(
    r"^(?P<name>[a-z0-9_]([a-z0-9_.-]*[a-z0-9_])?\.?|\[[0-9a-f:.]+\])(:(?P<port>\d{1,5}))?$"
)


def split(host: str) -> tuple[str, int | None] | None:
    """A Host value as (lower-case name, port or None), or None when it is not a host at all."""
    found = _HOST.match(host.strip().lower())
    if found is None:
        return None
    port = found.group("port")
    return found.group("name").rstrip("."), int(port) if port is not None else None


@dataclass(frozen=True, slots=True)
class Hosts:
    """The Host values a dashboard answers: (name, port) pairs (port None: any port), or any."""

    rules: frozenset[tuple[str, int | None]]
    any_host: bool = False

    @classmethod
    def of(cls, allowed: Iterable[str], port: int | None) -> Hosts:
        """The loopback names (on `port`, when `xjobs web` serves on it) and each `allowed` entry."""
        rules = {(name, port or None) for name in LOOPBACK_NAMES}
        if port == 80:
            rules |= {(name, None) for name in LOOPBACK_NAMES}
        any_host = False
        for entry in allowed:
            if entry == ANY:
                any_host = True
                continue
            parsed = split(entry)
            if parsed is None:
                raise DashboardOptionInvalidError(
                    f"allowed_hosts entry {entry!r} is not a host name, an address, "
                    "a name:port or '*'"
                )
            rules.add(parsed)
        return cls(frozenset(rules), any_host)

    def admit(self, host: str | None) -> bool:
        """Whether a request whose Host header is `host` is answered."""
        if self.any_host:
            return True
        parsed = split(host or "")
        if parsed is None:
            return False
        name, port = parsed
        return (name, port) in self.rules or (name, None) in self.rules


def is_loopback(bind: str) -> bool:
    """Whether a server bound to `bind` is reachable only from this machine."""
    if bind.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(bind.strip("[]")).is_loopback
    except ValueError:
        return False
