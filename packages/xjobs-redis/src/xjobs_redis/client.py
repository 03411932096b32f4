"""The redis-py client a URL names: a plain `Redis`, a `RedisCluster` for `redis+cluster://`, or
the primary its sentinels name for `redis+sentinel://`."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit, urlunsplit

from redis.asyncio import Redis
from redis.asyncio.cluster import RedisCluster

from xjobs_redis.sentinel import connect_sentinel, is_sentinel

Client = Redis | RedisCluster

# The cluster schemes, each with the plain scheme redis-py's cluster client takes.
CLUSTER_SCHEMES = {"redis+cluster": "redis", "rediss+cluster": "rediss"}


def is_cluster(url: str) -> bool:
    """Whether `url` names a Redis Cluster (`redis+cluster://` or `rediss+cluster://`)."""
    return urlsplit(url).scheme in CLUSTER_SCHEMES


def connect(url: str, **settings: Any) -> Client:
    """A client for `url`: a `RedisCluster` seeded from its host for a cluster scheme (the
    cluster has one database, so the path is dropped), the sentinels' primary for a sentinel
    scheme, else `Redis.from_url`."""
    if is_sentinel(url):
        return connect_sentinel(url, **settings)
    parts = urlsplit(url)
    plain = CLUSTER_SCHEMES.get(parts.scheme)
    if plain is None:
        return Redis.from_url(url, **settings)
    seed = urlunsplit((plain, parts.netloc, "", parts.query, ""))
    return RedisCluster.from_url(seed, **settings)


def dial_one(client: Client, url: str, **settings: Any) -> Redis:
    """A plain client of one server: `url`'s own, or on a cluster one of its primaries (a
    PUBLISH reaches every node of a cluster, so a subscriber on any node hears every channel),
    or a second client of the sentinels' primary."""
    if is_sentinel(url):
        return connect_sentinel(url, **settings)
    if isinstance(client, RedisCluster):
        node = client.get_default_node()
        parts = urlsplit(url)
        plain = CLUSTER_SCHEMES.get(parts.scheme, parts.scheme)
        netloc = f"{node.host}:{node.port}"
        if "@" in parts.netloc:
            netloc = f"{parts.netloc.rsplit('@', 1)[0]}@{netloc}"
        return Redis.from_url(urlunsplit((plain, netloc, "", parts.query, "")), **settings)
    return Redis.from_url(url, **settings)
