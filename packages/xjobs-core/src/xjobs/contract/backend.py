"""The `Backend` bundle: one engine's set of stores, opened from a URL, with the capabilities it declares.

Its URL is printed only with the password hidden (`redacted_url`).
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Final
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from xjobs.clock import Clock
from xjobs.contract.backfills import BackfillLedger
from xjobs.contract.children import ChildStore
from xjobs.contract.driver import BatchAck, JobDriver
from xjobs.contract.introspection import JobIntrospection
from xjobs.contract.rates import RateStore
from xjobs.contract.results import ResultStore
from xjobs.contract.retention import RetentionStore
from xjobs.contract.stores import (
    EventBus,
    LeaderElection,
    OutboxStore,
    SchedulerState,
    SlotStore,
    StepStore,
    WorkerRegistry,
)
from xjobs.contract.webhooks import WebhookLedger
from xjobs.errors import CapabilityMissingError

CAPABILITIES: Final[frozenset[str]] = frozenset(
    {
        "jobs",
        "workers",
        "slots",
        "steps",
        "events",
        "outbox",
        "scheduler",
        "leader",
        "introspection",
        "results",
        "wake",
        "retention",
        "rates",
        "backfills",
        "webhooks",
        "children",
    }
)
# What a backend declares beyond its stores: `ack_many`, its driver settles many completions at once.
FEATURES: Final[frozenset[str]] = frozenset({"ack_many"})


# A printed URL shows `***` for its password and for each credential in its query.
HIDDEN: Final = "***"
# Query parameters that carry a credential (`?password=` on Postgres and Redis URLs, tokens).
SECRET_PARAMS: Final = re.compile(r"pass|pwd|secret|token|credential|auth", re.IGNORECASE)
# A URL's userinfo with a password, anywhere in a text (the fallback for a URL that does not parse).
USERINFO: Final = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*://)(?P<user>[^:/@\s]*):[^@/\s]*@")
SECRET_QUERY: Final = re.compile(
    r"(?P<name>[?&][^=&\s]*(?:pass|pwd|secret|token|credential|auth)[^=&\s]*=)[^&#\s]*",
    re.IGNORECASE,
)


def redacted_url(url: str) -> str:
    """`url` with its password (`user:***@host`, `:***@host`) and secret query values hidden."""
    try:
        parts = urlsplit(url)
        password = parts.password
    except ValueError:
        return redacted_text(url)
    netloc = parts.netloc
    if password is not None:
        user, _, host = netloc.rpartition("@")
        netloc = f"{user.partition(':')[0]}:{HIDDEN}@{host}"
    query = parts.query
    if query:
        pairs = parse_qsl(query, keep_blank_values=True)
        if any(SECRET_PARAMS.search(name) for name, _ in pairs):
            query = urlencode(
                [(n, HIDDEN if SECRET_PARAMS.search(n) else v) for n, v in pairs], safe="*/:,"
            )
    if (netloc, query) == (parts.netloc, parts.query):
        return url
    return urlunsplit(parts._replace(netloc=netloc, query=query))


def redacted_text(text: str) -> str:
    """`text` with the password of every `scheme://user:password@` and `?password=` in it hidden."""
    text = USERINFO.sub(lambda m: f"{m['scheme']}{m['user']}:{HIDDEN}@", text)
    return SECRET_QUERY.sub(lambda m: f"{m['name']}{HIDDEN}", text)


class WakeSource:
    """A cross-process hint that a queue has new work; the poll stays the guarantee.

    `activate` runs once, when the first listener subscribes (a backend that only enqueues never
    opens a listening connection).
    """

    def __init__(self, activate: Callable[[], None] | None = None) -> None:
        self._listeners: list[Callable[[str | None], None]] = []
        self._live = False
        self._activate = activate

    def subscribe(self, listener: Callable[[str | None], None]) -> Callable[[], None]:
        """Call `listener(queue)` on each wake (`None`: every queue); answers the unsubscribe function."""
        self._listeners.append(listener)
        if self._activate is not None:
            activate, self._activate = self._activate, None
            activate()
        return lambda: self._listeners.remove(listener) if listener in self._listeners else None

    def emit(self, queue: str | None) -> None:
        """Wake the listeners of `queue`, or of every queue for `None` (a re-scan after a reconnect)."""
        for listener in list(self._listeners):
            listener(queue)

    @property
    def live(self) -> bool:
        """Whether a probe proved the wake delivers (unproven again after each reconnect)."""
        return self._live

    def set_live(self, live: bool) -> None:
        """Record whether a probe proved the wake delivers (a reconnect resets it to unproven)."""
        self._live = live


@dataclass(eq=False)
class Backend:
    """One engine's stores. `capabilities` names what it offers (its stores and `features`); a missing store is `None`."""

    name: str
    url: str
    clock: Clock
    jobs: JobDriver
    workers: WorkerRegistry | None = None
    slots: SlotStore | None = None
    steps: StepStore | None = None
    events: EventBus | None = None
    outbox: OutboxStore | None = None
    scheduler: SchedulerState | None = None
    leader: LeaderElection | None = None
    introspection: JobIntrospection | None = None
    results: ResultStore | None = None
    wake: WakeSource | None = None
    retention: RetentionStore | None = None
    backfills: BackfillLedger | None = None
    rates: RateStore | None = None
    webhooks: WebhookLedger | None = None
    # Child jobs of a parent run (`ctx.step.invoke/map/spawn`); its driver's terminal writes
    # resolve the child's group (see `contract/children`).
    children: ChildStore | None = None
    on_close: Callable[[], Awaitable[None]] | None = None
    on_install: Callable[[], Awaitable[None]] | None = None
    features: frozenset[str] = frozenset()
    # What the backend knows of its server, for the operator (e.g. Redis: run_id, data_lost).
    health: dict[str, Any] = field(default_factory=dict)
    capabilities: frozenset[str] = field(init=False)
    _closed: bool = field(default=False, init=False)

    def __post_init__(self) -> None:
        present = {"jobs"}
        for cap in CAPABILITIES - {"jobs"}:
            if getattr(self, cap) is not None:
                present.add(cap)
        unknown = self.features - FEATURES
        if unknown:
            raise CapabilityMissingError(
                f"backend {self.name} declares unknown features {sorted(unknown)}; known: {sorted(FEATURES)}"
            )
        features = set(self.features)
        if not isinstance(self.jobs, BatchAck):
            # A driver swapped in (a wrapper in a test) without `ack_many` does not inherit it.
            features.discard("ack_many")
        self.capabilities = frozenset(present | features)

    def require(self, capability: str) -> None:
        """Refuse a call that needs a capability this backend lacks."""
        if capability not in self.capabilities:
            raise CapabilityMissingError(
                f"the {self.name} backend does not offer {capability!r}; "
                f"it offers {', '.join(sorted(self.capabilities))}"
            )

    def __repr__(self) -> str:
        """The engine and its URL with the password hidden (a repr reaches logs and tracebacks)."""
        return f"<Backend {self.name} {redacted_url(self.url)}>"

    __str__ = __repr__

    async def install(self) -> None:
        """Create or upgrade the backend's durable structures (idempotent; nothing to do in memory)."""
        if self.on_install is not None:
            await self.on_install()

    async def close(self) -> None:
        """Release the engine's connections (idempotent)."""
        if self._closed:
            return
        self._closed = True
        if self.on_close is not None:
            await self.on_close()
