"""Start the shape-check worker, send it the jobs, and collect its answers (no torch here).

The worker runs user code (model constructors), so this side never trusts it to finish:
it runs in a process group of its own, each of its steps has a hard deadline, and the whole
group is killed (SIGKILL) when the run ends. A file that stops, hangs or exhausts the
worker costs only that file: it gets the error, and a new worker checks the others.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from typing import Any

_START_ALLOWANCE = 60.0
_GRACE = 10.0


class WorkerProcess:
    """A started worker, importing torch while its request is being prepared.

    `start_worker` begins the start-up as soon as a run knows it will check a model, so
    that it overlaps with the run's own work; `run_worker` sends it the request. A worker
    that is never used is stopped by `close`.
    """

    def __init__(self, warm: bool = False) -> None:
        env = dict(os.environ)
        package_parent = os.path.dirname(
            os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        )
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [package_parent, env.get("PYTHONPATH")]))
        env.setdefault("OMP_NUM_THREADS", "1")
        # TorchScript compiles `@torch.jit.script` helpers, and a compiled function given a fake
        # tensor with symbolic sizes crashes the process: with the JIT off they stay Python.
        env["PYTORCH_JIT"] = "0"
        # The only folder the worker may write to (the sandbox refuses writes elsewhere).
        self.private = tempfile.mkdtemp(prefix="torchlint-shapes-")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "torchlint.shapes.worker", *(["--warm"] if warm else [])],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
            cwd=self.private,
            start_new_session=os.name == "posix",
        )
        self._closed = False

    def close(self) -> None:
        """Stop it and everything it started (once: its group id may be reused after)."""
        if self._closed:
            return
        self._closed = True
        _kill_group(self.process)
        shutil.rmtree(self.private, ignore_errors=True)


def start_worker(warm: bool = False) -> WorkerProcess:
    """Start a worker now; give it to `run_worker` later (or `close` it). With `warm`, it
    loads fake tensors as soon as torch is imported, while the request is being prepared
    (for a run that will check models: most of them run on fake tensors)."""
    return WorkerProcess(warm)


def run_worker(
    request: dict[str, Any],
    timeout: float,
    started: WorkerProcess | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Results per job abspath, and worker facts (`ready` seconds, `error` if it died).

    `started` (from `start_worker`) serves the first attempt; a restart starts a new one.
    `progress` is called with the files answered so far and the number of jobs.
    """
    results: dict[str, Any] = {}
    facts: dict[str, Any] = {}
    jobs = list(request["jobs"])

    def progress_of() -> None:
        if progress is not None:
            progress(len(results), len(jobs))

    try:
        for _ in range(len(jobs) + 1):
            pending = [job for job in jobs if job["abspath"] not in results]
            if not pending:
                break
            worker, started = started or WorkerProcess(), None
            attempt = {**request, "jobs": pending}
            culprit, error = _run_once(worker, attempt, timeout, results, facts, progress_of)
            if error is None:
                break
            if culprit is None:  # it died before any user code ran: nothing to gain from retrying
                facts["error"] = error
                break
            results[culprit] = {"event": "file", "abspath": culprit, "error": error}
            facts["restarts"] = facts.get("restarts", 0) + 1
    finally:
        if started is not None:
            started.close()
    return results, facts


def _run_once(
    worker: WorkerProcess,
    request: dict[str, Any],
    timeout: float,
    results: dict[str, Any],
    facts: dict[str, Any],
    answered: Callable[[], None],
) -> tuple[str | None, str | None]:
    """Run one worker over the request's jobs, adding to `results`.

    Returns (None, None) when it answered every job; otherwise the file it was busy with
    (the oldest of those it was checking at once) when it died or ran late (None before it
    started on one), and the reason.
    """
    try:
        request = {**request, "private": worker.private}
        return _collect(worker.process, request, timeout, results, facts, answered)
    finally:
        worker.close()


def _collect(
    process: subprocess.Popen[bytes],
    request: dict[str, Any],
    timeout: float,
    results: dict[str, Any],
    facts: dict[str, Any],
    answered: Callable[[], None],
) -> tuple[str | None, str | None]:
    assert process.stdin and process.stdout and process.stderr
    payload = json.dumps(request).encode()
    stdin = process.stdin

    def feed() -> None:
        try:
            stdin.write(payload)
            stdin.close()
        except (OSError, ValueError):
            pass

    errors: list[bytes] = []
    stderr = process.stderr

    def drain() -> None:
        # The worker's streams are closed when it is stopped, possibly while this reads.
        with contextlib.suppress(OSError, ValueError):
            for chunk in iter(lambda: stderr.read(4096), b""):
                errors.append(chunk)
                del errors[:-4]

    for thread in (
        threading.Thread(target=feed, daemon=True),
        threading.Thread(target=drain, daemon=True),
    ):
        thread.start()
    expected = {job["abspath"] for job in request["jobs"]}
    # Before `ready` only torch and the engine run; after it every step is one user file.
    deadline = time.monotonic() + _START_ALLOWANCE
    # The files being checked, oldest first (the worker may check several at once).
    busy: list[str] = []
    loading = False
    buffer = b""
    stdout = process.stdout.fileno()
    while not expected <= results.keys():
        left = deadline - time.monotonic()
        if left <= 0:
            if not busy:
                return None, "the shape worker did not start in time"
            return busy[0], f"timed out after {timeout:g} s (the worker was stopped)"
        ready, _, _ = select.select([stdout], [], [], left)
        if not ready:
            continue
        chunk = os.read(stdout, 1 << 16)
        if not chunk:
            process.wait()
            if not busy:
                tail = b"".join(errors).decode("utf-8", "replace").strip().splitlines()
                return None, "the shape worker stopped" + (f": {tail[-1]}" if tail else "")
            return busy[0], f"the check stopped the worker ({_status(process.returncode)})"
        buffer += chunk
        while b"\n" in buffer:
            line, buffer = buffer.split(b"\n", 1)
            try:
                event = json.loads(line)
            except ValueError:
                continue
            kind = event.get("event")
            if kind == "ready":
                facts.setdefault("ready", event.get("seconds"))
                facts.setdefault("phases", event.get("phases"))
            elif kind == "load":  # importing before the checks: one file at a time
                busy, loading = [event.get("abspath")], True
            elif kind == "start":
                busy, loading = ([] if loading else busy), False
                busy.append(event.get("abspath"))
            elif kind == "file":
                results[event["abspath"]] = event
                busy = [path for path in busy if path != event["abspath"]]
                answered()
            if kind == "warm_up":  # torch's fake tensors loading, as at the start
                facts["warmed_up"] = True
                busy = []
                deadline = time.monotonic() + _START_ALLOWANCE
            else:
                deadline = time.monotonic() + timeout + _GRACE
    return None, None


def _status(code: int | None) -> str:
    if code is not None and code < 0:
        return f"signal {-code}"
    return f"exit status {code}"


def _kill_group(process: subprocess.Popen[bytes]) -> None:
    """End the worker and everything it started: no process outlives the run."""
    # Killed at once, answered or not: it has nothing left to do, and its interpreter's
    # shutdown with torch loaded takes a while. Not reaped before, so its group id is its own.
    with contextlib.suppress(ProcessLookupError, PermissionError, OSError):
        if os.name == "posix":
            os.killpg(process.pid, signal.SIGKILL)
        else:
            process.kill()
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(timeout=5)
    for stream in (process.stdout, process.stderr):
        if stream is not None:
            with contextlib.suppress(OSError):
                stream.close()
