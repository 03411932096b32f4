"""CI's nox runner: the default sessions of `uv run nox`, several at a time, in waves.

Wave one runs every default session but the fault suite, `--jobs` at a time (most of their time
is spent waiting on servers and timers, not on the CPU). Wave two runs the fault suite's two
sessions side by side and nothing else: their scenarios time leases, restarts and pauses, which a
loaded machine would blur. Each session's
output is printed whole when it ends; the exit status is 1 when any session failed.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ALONE = ("faults", "faults-failover")


def default_sessions() -> list[str]:
    """The sessions `uv run nox` runs, as `nox --list --json` names them."""
    listed = subprocess.run(
        ["uv", "run", "nox", "--list", "--json"], check=True, capture_output=True, text=True
    )
    return [s["session"] for s in json.loads(listed.stdout)]


def run(session: str, logs: Path) -> tuple[str, int, float, Path]:
    """One nox session, its output in a file of its own."""
    log = logs / (session.translate(str.maketrans("()'=, ", "______")) + ".log")
    started = time.monotonic()
    with log.open("w") as out:
        status = subprocess.run(
            ["uv", "run", "nox", "-s", session], stdout=out, stderr=subprocess.STDOUT, check=False
        ).returncode
    return session, status, time.monotonic() - started, log


def wave(sessions: list[str], jobs: int, logs: Path) -> list[str]:
    """Run `sessions`, `jobs` at a time; print each one's output when it ends; answer the failed."""
    failed = []
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        for session, status, took, log in pool.map(lambda s: run(s, logs), sessions):
            verdict = "passed" if status == 0 else f"FAILED (exit {status})"
            print(f"\n===== nox -s {session}: {verdict} in {took:.0f} s =====", flush=True)
            sys.stdout.write(log.read_text())
            sys.stdout.flush()
            if status != 0:
                failed.append(session)
    return failed


def main() -> int:
    """Run the waves; 0 when every session passed."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--jobs", type=int, default=3, help="sessions at a time in wave one")
    args = parser.parse_args()
    sessions = default_sessions()
    first = [s for s in sessions if s not in ALONE]
    second = [s for s in sessions if s in ALONE]
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="xjobs-ci-") as tmp:
        failed = wave(first, args.jobs, Path(tmp)) + wave(second, len(ALONE), Path(tmp))
    print(f"\nCI sessions took {time.monotonic() - started:.0f} s", flush=True)
    if failed:
        print(f"CI failed: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
