"""Opening a Redis `Backend`: the client, the scripts loaded once, the stores and the wake."""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from redis.asyncio import Redis
from redis.asyncio.retry import Retry
from redis.backoff import EqualJitterBackoff, NoBackoff

from xjobs.clock import Clock, SystemClock
from xjobs.contract.backend import Backend, WakeSource
from xjobs.errors import SchemaInvalidError
from xjobs_redis.backfills import RedisBackfillLedger
from xjobs_redis.children import RedisChildren
from xjobs_redis.client import connect, dial_one, is_cluster
from xjobs_redis.driver import RedisJobDriver
from xjobs_redis.errors import interpret_error
from xjobs_redis.events import RedisEventBus
from xjobs_redis.executor import Executor
from xjobs_redis.health import ServerWatch
from xjobs_redis.introspection import RedisIntrospection
from xjobs_redis.keys import DEFAULT_PREFIX, Keys, validate_prefix
from xjobs_redis.purge import Expiry, RedisRetention
from xjobs_redis.rates import RedisRateStore
from xjobs_redis.replication import OPTIONS as REPLICATION_OPTIONS
from xjobs_redis.replication import choose_replication
from xjobs_redis.results import RedisResults
from xjobs_redis.scheduler import RedisLeader, RedisSchedulerState
from xjobs_redis.slots import RedisSlotStore
from xjobs_redis.steps import RedisStepStore
from xjobs_redis.wake import WakeSubscriber
from xjobs_redis.webhooks import RedisWebhookLedger
from xjobs_redis.workers import RedisWorkerRegistry

# Re-dial for 1.1 to 2.2 s in all before a call is `XJOBS_BACKEND_UNAVAILABLE`: long enough for
# a restart, so a settle does not fail (and its job run again once the lease lapses).
RETRIES = 6
RETRY_BASE_S = 0.05
RETRY_CAP_S = 0.5


def default_retry() -> Retry:
    """A pooled connection a restart left dead fails its first command: re-dial a few times.

    A retried script may run twice when only its reply was lost; every script tolerates that
    (an enqueue dedupes by id, a settle's second run misses its fence, a slot is the holder's
    own, and a claim's first jobs lapse and are rescued).
    """
    return Retry(EqualJitterBackoff(cap=RETRY_CAP_S, base=RETRY_BASE_S), retries=RETRIES)


def split_url(url: str) -> tuple[str, dict[str, str]]:
    """The URL as redis-py takes it, with the `xjobs_*` and `wait_*` query options split off."""
    parts = urlsplit(url)
    query = parse_qsl(parts.query)

    def mine(key: str) -> bool:
        return key.startswith("xjobs_") or key in REPLICATION_OPTIONS

    ours = {k.removeprefix("xjobs_"): v for k, v in query if mine(k)}
    rest = [(k, v) for k, v in query if not mine(k)]
    return urlunsplit((parts.scheme, parts.netloc, parts.path, urlencode(rest), "")), ours


def choose_prefix(argument: str, from_url: str | None) -> str:
    """The key prefix: `?xjobs_prefix=` in the URL, else the `prefix` argument; both must agree."""
    if from_url is not None and argument not in (DEFAULT_PREFIX, from_url):
        raise SchemaInvalidError(
            f"the URL names key prefix {from_url!r} and the prefix argument {argument!r}; pass one"
        )
    return validate_prefix(from_url if from_url is not None else argument)


async def open_backend(
    url: str,
    *,
    clock: Clock | None = None,
    prefix: str = DEFAULT_PREFIX,
    wait_replicas: int | None = None,
    wait_timeout_ms: int | None = None,
    **options: Any,
) -> Backend:
    """A `Backend` over the Redis server at `url` (`redis://` or `rediss://`), over a Redis
    Cluster seeded from the node at `url` (`redis+cluster://` or `rediss+cluster://`), or over
    the primary the sentinels at `url` name (`redis+sentinel://h1:p1,h2:p2/service[/db]`).

    Every key lives under `prefix` (or `?xjobs_prefix=` in the URL); `wait_replicas=N` (or
    `?wait_replicas=N`) makes every call wait, up to `wait_timeout_ms` (default 1,000), until N
    replicas acknowledged its writes. Other keyword options go to `redis.asyncio.Redis.from_url`
    (or `RedisCluster.from_url`) (pool size, timeouts, TLS, `retry`). The scripts are loaded
    here, so an unreachable server is `XJOBS_BACKEND_UNAVAILABLE` at open.
    """
    plain, ours = split_url(url)
    keys = Keys(choose_prefix(prefix, ours.get("prefix")))
    replication = choose_replication(
        ours, wait_replicas, wait_timeout_ms, cluster=is_cluster(plain)
    )
    clock = clock or SystemClock()
    try:
        settings = {"retry": default_retry(), **options, "decode_responses": True}
        client = connect(plain, **settings)
    except Exception as exc:
        raise interpret_error(exc) from exc
    executor = Executor(client, clock, replication=replication)
    watch = ServerWatch(client, keys)
    try:
        await executor.load()
    except BaseException:
        await executor.close()
        raise

    await watch.open()

    def dial() -> Redis:
        return dial_one(client, plain, **{**settings, "retry": Retry(NoBackoff(), 0)})

    source = WakeSource(activate=lambda: subscriber.start())
    subscriber = WakeSubscriber(client, dial, keys.wake_channel(), source, watch.check)

    async def close() -> None:
        await subscriber.close()
        await executor.close()

    expiry = Expiry()  # the retention policy every settling script reads, once the app keeps one
    events = RedisEventBus(executor, keys)
    jobs = RedisJobDriver(executor, keys, expiry)
    backend = Backend(
        name="redis",
        url=url,
        clock=clock,
        jobs=jobs,
        workers=RedisWorkerRegistry(executor, keys),
        slots=RedisSlotStore(executor, keys),
        rates=RedisRateStore(executor, keys),
        steps=RedisStepStore(executor, keys),
        events=events,
        scheduler=RedisSchedulerState(executor, keys),
        leader=RedisLeader(executor, keys),
        introspection=RedisIntrospection(executor, keys, clock, jobs.endings),
        results=RedisResults(executor, keys, expiry, jobs),
        retention=RedisRetention(executor, keys, events, expiry, jobs.endings),
        children=RedisChildren(executor, keys, jobs),
        backfills=RedisBackfillLedger(executor, keys),
        webhooks=RedisWebhookLedger(executor, keys),
        wake=source,
        on_close=close,
        health=watch.health,
        features=frozenset({"ack_many"}),
    )
    return backend
