"""Start the shape-check worker, send it the jobs, and collect its answers (no torch here)."""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import tempfile
import threading
import time
from typing import Any

_START_ALLOWANCE = 60.0
_GRACE = 10.0


def run_worker(request: dict[str, Any], timeout: float) -> tuple[dict[str, Any], dict[str, Any]]:
    """Results per job abspath, and worker facts (`ready` seconds, `error` if it died)."""
    env = dict(os.environ)
    package_parent = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [package_parent, env.get("PYTHONPATH")]))
    env.setdefault("OMP_NUM_THREADS", "1")
    started = time.monotonic()
    process = subprocess.Popen(
        [sys.executable, "-m", "torchlint.shapes.worker"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        cwd=tempfile.gettempdir(),
    )
    assert process.stdin and process.stdout and process.stderr
    payload = json.dumps(request).encode()
    stdin = process.stdin

    def feed() -> None:
        try:
            stdin.write(payload)
            stdin.close()
        except OSError:
            pass

    errors: list[bytes] = []
    stderr = process.stderr

    def drain() -> None:
        for chunk in iter(lambda: stderr.read(4096), b""):
            errors.append(chunk)
            del errors[:-4]

    threads = [
        threading.Thread(target=feed, daemon=True),
        threading.Thread(target=drain, daemon=True),
    ]
    for thread in threads:
        thread.start()
    jobs = len(request["jobs"])
    deadline = started + _START_ALLOWANCE + jobs * (timeout + _GRACE)
    results: dict[str, Any] = {}
    facts: dict[str, Any] = {}
    buffer = b""
    stdout = process.stdout.fileno()
    while len(results) < jobs:
        left = deadline - time.monotonic()
        if left <= 0:
            facts["error"] = "the shape worker did not finish in time"
            break
        ready, _, _ = select.select([stdout], [], [], left)
        if not ready:
            continue
        chunk = os.read(stdout, 1 << 16)
        if not chunk:
            tail = b"".join(errors).decode("utf-8", "replace").strip().splitlines()
            facts["error"] = "the shape worker stopped" + (f": {tail[-1]}" if tail else "")
            break
        buffer += chunk
        while b"\n" in buffer:
            line, buffer = buffer.split(b"\n", 1)
            try:
                event = json.loads(line)
            except ValueError:
                continue
            if event.get("event") == "ready":
                facts["ready"] = event.get("seconds")
            elif event.get("event") == "file":
                results[event["abspath"]] = event
    if process.poll() is None:
        if "error" in facts:
            process.kill()
        try:
            process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    return results, facts
