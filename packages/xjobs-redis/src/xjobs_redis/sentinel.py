"""A `redis+sentinel://` URL read into its sentinels, service and database, and the client it opens.

`redis+sentinel://[user:password@]h1:p1,h2:p2,h3:p3/service_name[/db]` (`rediss+sentinel://` for
TLS): the client asks the sentinels which server is the primary of `service_name` and asks again
after a failover. The URL's credentials are the data servers'; `?sentinel_password=` (and
`sentinel_username=`) are the sentinels' own, when they require one.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Final
from urllib.parse import parse_qsl, unquote, urlsplit

from redis.asyncio import Redis
from redis.asyncio.sentinel import Sentinel, SentinelConnectionPool

from xjobs_redis.errors import RedisUrlInvalidError

# Each sentinel scheme, with whether its servers speak TLS.
SENTINEL_SCHEMES: Final = {"redis+sentinel": False, "rediss+sentinel": True}
DEFAULT_SENTINEL_PORT: Final = 26379
SENTINEL_OPTIONS: Final = ("sentinel_username", "sentinel_password")


@dataclass(frozen=True, slots=True)
class SentinelTarget:
    """The sentinels to ask, the service whose primary they name, and how to log in to it."""

    sentinels: tuple[tuple[str, int], ...]
    service: str
    db: int = 0
    tls: bool = False
    username: str | None = None
    password: str | None = field(default=None, repr=False)
    sentinel_login: dict[str, str] = field(default_factory=dict, repr=False)


def is_sentinel(url: str) -> bool:
    """Whether `url` names a primary through its sentinels (`redis+sentinel://`, `rediss+sentinel://`)."""
    return urlsplit(url).scheme in SENTINEL_SCHEMES


def parse_sentinel_url(url: str) -> SentinelTarget:
    """The sentinels, service, database and logins of a `redis+sentinel://` URL, or a refusal
    naming what is wrong (no sentinel, a bad port, no service name, a database that is not a
    number, an unknown option)."""
    parts = urlsplit(url)
    if parts.scheme not in SENTINEL_SCHEMES:
        raise RedisUrlInvalidError(f"{parts.scheme}:// is not a sentinel scheme")
    userinfo, _, hosts = parts.netloc.rpartition("@")
    sentinels = tuple(_address(host) for host in hosts.split(",") if host)
    if not sentinels:
        raise RedisUrlInvalidError("a redis+sentinel:// URL names at least one sentinel host:port")
    names = [unquote(part) for part in parts.path.split("/") if part]
    if not names or len(names) > 2:
        raise RedisUrlInvalidError(
            "a redis+sentinel:// URL's path is /service_name or /service_name/db "
            f"(got {parts.path!r})"
        )
    db = _database(names[1]) if len(names) == 2 else 0
    options = dict(parse_qsl(parts.query))
    unknown = sorted(set(options) - set(SENTINEL_OPTIONS))
    if unknown:
        raise RedisUrlInvalidError(
            f"unknown redis+sentinel:// option(s) {', '.join(unknown)}; known: "
            f"{', '.join(SENTINEL_OPTIONS)}"
        )
    username, _, password = userinfo.partition(":")
    return SentinelTarget(
        sentinels=sentinels,
        service=names[0],
        db=db,
        tls=SENTINEL_SCHEMES[parts.scheme],
        username=unquote(username) or None,
        password=unquote(password) or None,
        sentinel_login={k.removeprefix("sentinel_"): v for k, v in options.items()},
    )


class SentinelRedis(Redis):
    """A client of a sentinel-named primary that owns its sentinels: closing it closes their
    connections too."""

    async def aclose(self, close_connection_pool: bool | None = None) -> None:
        pool = self.connection_pool
        await super().aclose(close_connection_pool)
        if isinstance(pool, SentinelConnectionPool):
            await pool.sentinel_manager.aclose()


def connect_sentinel(url: str, **settings: Any) -> Redis:
    """A client of the primary the URL's sentinels name: it asks them again whenever a
    connection to the old primary fails or finds it read-only (a failover)."""
    target = parse_sentinel_url(url)
    login: dict[str, Any] = {
        "username": target.username,
        "password": target.password,
        "db": target.db,
    }
    if target.tls:
        settings = {"ssl": True, **settings}
    # the sentinels are dialled with the same timeouts as the servers, and their own login
    sentinel_settings = {k: v for k, v in settings.items() if k.startswith("socket_")}
    sentinel_settings |= {"decode_responses": True, **target.sentinel_login}
    # redis-py's Sentinel.__init__ carries no annotations
    sentinel = Sentinel(list(target.sentinels), sentinel_kwargs=sentinel_settings)  # type: ignore[no-untyped-call]
    client: Redis = sentinel.master_for(
        target.service, redis_class=SentinelRedis, **login, **settings
    )
    return client


def _address(host: str) -> tuple[str, int]:
    name, colon, port = (
        host.rpartition(":") if host.rfind(":") > host.rfind("]") else (host, "", "")
    )
    name = name.strip("[]")
    if not name:
        raise RedisUrlInvalidError(f"sentinel address {host!r} has no host")
    if not colon:
        return name, DEFAULT_SENTINEL_PORT
    if not port.isdigit() or not 0 < int(port) < 65_536:
        raise RedisUrlInvalidError(f"sentinel address {host!r} has no valid port")
    return name, int(port)


def _database(text: str) -> int:
    if not text.isdigit():
        raise RedisUrlInvalidError(f"a redis+sentinel:// database is a number (got {text!r})")
    return int(text)
