"""Every Redis key name xjobs uses, built here and nowhere else (scripts receive them in KEYS).

Per queue `q`, every key carries the hash tag `{<prefix>:<q>}`, so one queue's scripts touch one
slot and run on Redis Cluster. The deployment's keys (the queue set, the pauses, the worker
registry, the scheduler's state and leader) share the tag `{<prefix>}`; each concurrency key's
slots ZSET has a hash tag of its own; the events (and which queues wait for each name) share the
tag `{<prefix>:events}`, while a wait lives in its job's queue slot. No script spans two tags:
what spans them is two scripts in a fixed order (the layout and the reasoning are in the README).
"""

from __future__ import annotations

import re
from typing import Final
from urllib.parse import quote

from xjobs.contract.driver import FINISHED_STATES
from xjobs.contract.webhooks import endpoint_id
from xjobs.errors import EventInvalidError, SchemaInvalidError
from xjobs.event_match import validate_event_name, validate_event_tenant
from xjobs.names import validate_queue

PREFIX_NAME: Final = re.compile(r"[a-z0-9_]{1,40}")
DEFAULT_PREFIX: Final = "xjobs"
JOB_MARK: Final = ":job:"
COUNTER_TIERS: Final = ("minute", "hour", "day")
QUEUE_TAGS_KEPT: Final = 1024  # the most queue names whose validated key head is remembered
# An event name in one tenant (`event_topic`): the name, then `@` and the tenant percent-encoded.
RUN_ID: Final = re.compile(r"[A-Za-z0-9_.-]{1,128}")
EVENT_TOPIC: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]{0,127}(@[A-Za-z0-9_.~%-]+)?")


def validate_prefix(prefix: object) -> str:
    """A key prefix: 1-40 characters of `[a-z0-9_]`, or `SchemaInvalidError`."""
    if not isinstance(prefix, str) or not PREFIX_NAME.fullmatch(prefix):
        raise SchemaInvalidError(
            f"key prefix {prefix!r} must be 1-40 characters of [a-z0-9_] (xjobs_prefix=...)"
        )
    return prefix


class Keys:
    """The key names under one validated prefix."""

    __slots__ = ("_events", "_events_queues", "_global", "_tags", "prefix")

    def __init__(self, prefix: str) -> None:
        self.prefix = validate_prefix(prefix)
        self._global = f"{prefix}:{{{prefix}}}"
        self._events = f"{prefix}:{{{prefix}:events}}"
        self._events_queues = f"{self._events}:event_queues:"
        self._tags: dict[str, str] = {}  # validated queue name -> its keys' common head

    # -- one queue ----------------------------------------------------------------------------

    def _queue(self, queue: str) -> str:
        """The head of every key of `queue` (validated once per name: each enqueue builds six)."""
        tag = self._tags.get(queue) if isinstance(queue, str) else None
        if tag is None:
            tag = f"{self.prefix}:{{{self.prefix}:{validate_queue(queue)}}}"
            if len(self._tags) < QUEUE_TAGS_KEPT:
                self._tags[queue] = tag
        return tag

    def job(self, queue: str, job_id: str) -> str:
        """The job's HASH; index members are these names, so a script never builds one."""
        return f"{self._queue(queue)}{JOB_MARK}{job_id}"

    def queue_of_job(self, job_key: str) -> str:
        """The queue a job key (`job`) names."""
        head = f"{self.prefix}:{{{self.prefix}:"
        return job_key[len(head) : job_key.index("}" + JOB_MARK)]

    def settled_channel(self, queue: str) -> str:
        """The pub/sub channel a settle publishes a WATCHED job's id on (a result waiter's)."""
        return f"{self._queue(queue)}:settled"

    def ready(self, queue: str) -> str:
        """ZSET of due jobs in claim order: score priority * 2^42 + run_at_ms."""
        return f"{self._queue(queue)}:ready"

    def delayed(self, queue: str) -> str:
        """ZSET of ready or waiting jobs not yet due: score run_at_ms."""
        return f"{self._queue(queue)}:delayed"

    def leased(self, queue: str) -> str:
        """ZSET of running jobs: score lease_until_ms."""
        return f"{self._queue(queue)}:leased"

    def rescheduling(self, queue: str, job_id: str) -> list[str]:
        """The first four keys of every script that takes a leased job back to ready or delayed."""
        return [self.job(queue, job_id), self.ready(queue), self.delayed(queue), self.leased(queue)]

    def live(self, queue: str) -> str:
        """HASH of the idempotency namespaces held by live jobs: namespace -> job key."""
        return f"{self._queue(queue)}:live"

    def throttle(self, queue: str, namespace: str) -> str:
        """HASH of a namespace's last throttled job: `until` (throttle_until_ms) and `job` (its key)."""
        return f"{self._queue(queue)}:throttle:{namespace}"

    def finished(self, queue: str, state: str) -> str:
        """ZSET of the jobs in one finished state: score created_at_ms."""
        if state not in FINISHED_STATES:
            raise ValueError(f"{state!r} is not a finished state")
        return f"{self._queue(queue)}:{state}"

    def steps(self, queue: str, run_id: str) -> str:
        """HASH of one run's steps: step name -> the record's JSON (on the job's slot, for the fence)."""
        return f"{self._queue(queue)}:steps:{run_id}"

    def created(self, queue: str) -> str:
        """ZSET of the live jobs (ready, running, waiting): score created_at_ms (the lists' index)."""
        return f"{self._queue(queue)}:created"

    def waiting(self, queue: str) -> str:
        """ZSET of the waiting jobs: score run_at_ms (the queue counts split ready from waiting)."""
        return f"{self._queue(queue)}:waiting"

    def errors(self, queue: str) -> str:
        """HASH job id -> its last attempt errors, one JSON object a line, oldest first."""
        return f"{self._queue(queue)}:errors"

    def joined(self, queue: str) -> str:
        """STRING present once the queue joined the queue SET and took the paused job names (an
        enqueue into a queue without it writes nothing and asks for the join first)."""
        return f"{self._queue(queue)}:joined"

    def event_waits(self, queue: str) -> str:
        """HASH job id -> the JSON of the job's one event wait (with its waiting SET's key)."""
        return f"{self._queue(queue)}:event_waits"

    def event_waiting(self, queue: str, topic: str) -> str:
        """SET of the ids of the queue's jobs waiting for one event name in one tenant (`topic`)."""
        return f"{self._queue(queue)}:event_waiting:{_valid_topic(topic)}"

    def event_deadlines(self, queue: str) -> str:
        """ZSET of the queue's waits that have a deadline: member the job id, score deadline_ms."""
        return f"{self._queue(queue)}:event_deadlines"

    def paused_jobs(self) -> str:
        """SET of the job names paused deployment-wide (beside the pauses HASH): what a queue's
        join copies into its `paused_names`."""
        return f"{self._global}:paused_jobs"

    def paused(self, queue: str) -> str:
        """STRING present while the queue is paused (its value the pause's paused_at_ms)."""
        return f"{self._queue(queue)}:paused"

    def paused_names(self, queue: str) -> str:
        """SET of the job names paused in every queue, as this queue's claim reads them."""
        return f"{self._queue(queue)}:paused_names"

    def counters(self, queue: str, tier: str) -> str:
        """HASH of one counter tier: `bucket_ms|outcome|name` -> count."""
        return f"{self._queue(queue)}:counters:{_tier(tier)}"

    def counter_index(self, queue: str, tier: str) -> str:
        """ZSET of one counter tier's fields by bucket_ms (the rollup and the trim read it)."""
        return f"{self._queue(queue)}:counter_index:{_tier(tier)}"

    def counters_folded(self, queue: str) -> str:
        """STRING: the minute bucket every earlier minute bucket of the queue was folded before."""
        return f"{self._queue(queue)}:counters_folded"

    def child_endings(self, queue: str) -> str:
        """HASH child id -> the JSON of its first ending not yet applied to its group (the child's
        terminal script writes it, `xjobs_redis.endings` delivers it and drops it)."""
        return f"{self._queue(queue)}:child_endings"

    # -- child groups (one parent run's groups share the tag `{<prefix>:grp:<run id>}`) --------

    def _run_groups(self, parent_run_id: str) -> str:
        return f"{self.prefix}:{{{self.prefix}:grp:{_valid_run(parent_run_id)}}}"

    def run_groups(self, parent_run_id: str) -> str:
        """SET of the steps of one parent run that hold a child group (the cancel cascade and
        `family` read it)."""
        return f"{self._run_groups(parent_run_id)}:steps"

    def group(self, parent_run_id: str, step: str) -> str:
        """HASH of one child group: its declaration and its counts (spawned, ended, failed,
        first_failed, resolved, parked)."""
        return f"{self._run_groups(parent_run_id)}:group:{quote(step, safe='')}"

    def group_members(self, parent_run_id: str, step: str) -> str:
        """ZSET of a group's children: member the child's job key, score its index."""
        return f"{self._run_groups(parent_run_id)}:members:{quote(step, safe='')}"

    def group_ended(self, parent_run_id: str, step: str) -> str:
        """SET of the ids of a group's children whose ending was counted (each once)."""
        return f"{self._run_groups(parent_run_id)}:ended:{quote(step, safe='')}"

    # -- global -------------------------------------------------------------------------------

    def queues(self) -> str:
        """SET of every queue name that was ever enqueued into."""
        return f"{self._global}:queues"

    def pauses(self) -> str:
        """HASH of every pause: `queue|<name>` or `job|<name>` -> paused_at_ms."""
        return f"{self._global}:pauses"

    def wake_channel(self) -> str:
        """The pub/sub channel an enqueue of a due row publishes its queue name on."""
        return f"{self._global}:wake"

    def workers(self) -> str:
        """ZSET of worker ids: score the row's expiry."""
        return f"{self._global}:workers"

    def worker_info(self) -> str:
        """HASH worker id -> JSON of host, pid, queues, started_at_ms."""
        return f"{self._global}:worker_info"

    def worker_seen(self) -> str:
        """HASH worker id -> last_seen_ms."""
        return f"{self._global}:worker_seen"

    # -- the scheduler (global; a fire's job is enqueued by a second step in its queue's slot) --

    def scheduler_watermarks(self) -> str:
        """HASH task name -> watermark_ms (a task never armed has no field)."""
        return f"{self._global}:scheduler_watermarks"

    def scheduler_fires(self) -> str:
        """HASH task name -> JSON of its last fire: occurrence_ms, job_id, fired_at_ms."""
        return f"{self._global}:scheduler_fires"

    def scheduler_pending(self) -> str:
        """HASH task name -> JSON of a fire whose watermark moved and whose job is not yet
        recorded: occurrence_ms, queue, row, fired_at_ms (any scheduler completes it)."""
        return f"{self._global}:scheduler_pending"

    def scheduler_paused(self) -> str:
        """SET of the paused task names."""
        return f"{self._global}:scheduler_paused"

    def scheduler_leader(self) -> str:
        """HASH of the scheduler's leadership: holder, expires_ms."""
        return f"{self._global}:scheduler_leader"

    # -- the event bus ------------------------------------------------------------------------

    @staticmethod
    def event_topic(event: str, tenant: str | None) -> str:
        """One event name in one tenant, as the event keys spell it: the name alone for the
        untenanted scope (the layout from before tenants, so its events and waits stay where they
        were), else `<name>@<tenant, percent-encoded>` (no name holds `@`, no encoded tenant `:`)."""
        name = validate_event_name(event)
        scope = validate_event_tenant(tenant)
        return name if scope is None else f"{name}@{quote(scope, safe='')}"

    def event_names(self) -> str:
        """SET of the `events_sent` ZSET keys that hold events (so a purge finds every name)."""
        return f"{self._events}:event_names"

    def events_sent(self, topic: str) -> str:
        """ZSET of one event name's events in one tenant (`topic`): member the event id, score
        sent_at_ms."""
        return f"{self._events}:events_sent:{_valid_topic(topic)}"

    def event_payloads(self) -> str:
        """HASH event id -> the event's payload JSON."""
        return f"{self._events}:event_payloads"

    def event_queues(self, topic: str) -> str:
        """HASH of the queues that may hold a wait for one event name in one tenant (`topic`; a
        send wakes each): queue -> how many parks added it (the purge drops a queue whose waits
        for the topic are gone, fenced on that count, so a park meanwhile keeps it)."""
        return f"{self._events_queues}{_valid_topic(topic)}"

    def event_of_queues(self, queues_key: str) -> str:
        """The topic an `event_queues` key is of (its text after `:event_queues:`)."""
        return queues_key.removeprefix(self._events_queues)

    def event_waited(self) -> str:
        """SET of the `event_queues` HASH keys that exist (so a purge finds every name's)."""
        return f"{self._events}:event_waited"

    # -- fleet concurrency slots --------------------------------------------------------------

    def slot(self, key: str) -> str:
        """ZSET of one slot key's holders: member `<job_id>:<claims>`, score expiry.

        The text `lease:` stays in the name (the store was the lease store once), so the slots a
        running fleet holds survive an upgrade.
        """
        return f"{self.prefix}:{{{self.prefix}:lease:{key}}}"

    # -- the webhook ledger (each endpoint's keys share a hash tag of their own) ---------------

    def _webhook(self, endpoint: str) -> str:
        return f"{self.prefix}:{{{self.prefix}:webhook:{endpoint_id(endpoint)}}}"

    def webhook_state(self, endpoint: str) -> str:
        """HASH of one webhook endpoint's state: failures (its current run), disabled_at_ms."""
        return f"{self._webhook(endpoint)}:state"

    def webhook_attempts(self, endpoint: str) -> str:
        """LIST of one webhook endpoint's attempts, newest first, each a JSON object."""
        return f"{self._webhook(endpoint)}:attempts"

    # -- fleet rate limits --------------------------------------------------------------------

    def rate(self, key: str) -> str:
        """HASH of one rate bucket (`t` its TAT, `l` its deferral line). Every bucket shares the ONE hash tag
        `{<prefix>:rate:buckets}` (no queue name holds `:`), so a script takes several at once in one slot."""
        return f"{self.prefix}:{{{self.prefix}:rate:buckets}}:{key}"

    # -- the backfill ledger (its keys share the ONE tag `{<prefix>:backfills}`) ---------------

    def backfills(self) -> str:
        """HASH run id -> the JSON of that backfill run's ledger row."""
        return f"{self.prefix}:{{{self.prefix}:backfills}}:rows"

    def backfill_verdicts(self) -> str:
        """HASH JSON [name, checksum, environment, tenant] -> the run id that completed it first."""
        return f"{self.prefix}:{{{self.prefix}:backfills}}:verdicts"


def _tier(tier: str) -> str:
    if tier not in COUNTER_TIERS:
        raise ValueError(f"{tier!r} is not a counter tier")
    return tier


def job_id_of(job_key: str) -> str:
    """The job id a job key names (the text after `:job:`)."""
    return job_key.split(JOB_MARK, 1)[1]


def _valid_run(run_id: str) -> str:
    """A run id as a key part: no brace (it sits inside a hash tag), no colon."""
    if not isinstance(run_id, str) or not RUN_ID.fullmatch(run_id):
        raise ValueError(f"{run_id!r} is not a run id")
    return run_id


def _valid_topic(topic: str) -> str:
    """`topic` when it is an `event_topic` spelling, so no key of the bus is built from free text."""
    if not isinstance(topic, str) or not EVENT_TOPIC.fullmatch(topic):
        raise EventInvalidError(f"{topic!r} is not an event topic (Keys.event_topic)")
    return topic
