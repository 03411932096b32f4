"""A real `xjobs worker` process of `obs_app` with telemetry flags, and HTTP reads of its endpoints."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).parent
UP_WITHIN_S = 30.0


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class WorkerProcess:
    """One worker process and the port its telemetry answers on."""

    process: subprocess.Popen[str]
    port: int
    log: Path

    def get(self, path: str, timeout_s: float = 10.0) -> tuple[int, str]:
        """GET `path` on the telemetry port: the status and the body."""
        url = f"http://127.0.0.1:{self.port}{path}"
        try:
            with urllib.request.urlopen(url, timeout=timeout_s) as answer:
                return int(answer.status), answer.read().decode()
        except urllib.error.HTTPError as refused:
            return int(refused.code), refused.read().decode()

    def probe(self, path: str) -> tuple[int, dict[str, Any]]:
        """A health probe's status and JSON body."""
        status, body = self.get(path)
        return status, json.loads(body)

    def wait_up(self) -> None:
        """Until the telemetry port answers (fails the test if the process dies first)."""
        deadline = time.monotonic() + UP_WITHIN_S
        while True:
            if self.process.poll() is not None:
                raise AssertionError(f"the worker exited {self.process.returncode}:\n{self.stop()}")
            try:
                self.get("/healthz", timeout_s=2)
                return
            except OSError:
                if time.monotonic() > deadline:
                    raise AssertionError(
                        f"no telemetry answer within {UP_WITHIN_S}s:\n{self.stop()}"
                    ) from None
                time.sleep(0.1)

    def stop(self, *, kill: bool = False) -> str:
        """SIGTERM (SIGKILL with `kill`, or if it lingers); answers its log (stderr)."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL if kill else signal.SIGTERM)
        try:
            self.process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        return self.log.read_text(errors="replace")


def start_worker(url: str, markers: Path, *flags: str) -> WorkerProcess:
    """`xjobs worker obs_app:app` on `url` with `flags`, its telemetry on a free port."""
    port = free_port()
    env = {**os.environ, "XJOBS_OBS_URL": url, "XJOBS_OBS_DIR": str(markers)}
    command = [sys.executable, "-m", "xjobs_cli", "worker", "obs_app:app", "--lease", "1.5"]
    command += ["--telemetry-host", "127.0.0.1", *[f.replace("PORT", str(port)) for f in flags]]
    log = markers / "worker.log"
    # cwd is this directory: `load_app` puts the current directory first on sys.path.
    with log.open("w") as sink:
        process = subprocess.Popen(
            command, cwd=HERE, env=env, stdout=subprocess.DEVNULL, stderr=sink, text=True
        )
    worker = WorkerProcess(process, port, log)
    worker.wait_up()
    return worker
