"""Shape checks off the server's process: one worker, started on first use, one file at a time.

The worker imports torch (seconds), so it stays up between checks. A check whose awaiting task
is cancelled (a newer edit made it stale) kills the worker rather than wait for it; the next
check starts a new one. Source diagnostics never wait on any of this.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from torchlint.diagnostic import Diagnostic
from torchlint.server.shape_worker import DEFAULT_TARGET

#: Replies can hold many diagnostics; asyncio's default line limit (64 KiB) is too small.
_LINE_LIMIT = 1 << 26


@dataclass
class ShapeResult:
    """One file's shape check: its diagnostics, and the tables of the models it checked."""

    diagnostics: list[Diagnostic]
    tables: list[dict[str, Any]] = field(default_factory=list)


class ShapeRunner:
    """Runs `torchlint.shapes.check_files` (or `target`) in a worker process."""

    def __init__(
        self, target: str = DEFAULT_TARGET, log: Callable[[str], None] | None = None
    ) -> None:
        self.target = target
        self.log = log or (lambda message: None)
        #: False once the worker said it cannot run (no torch, no shape engine).
        self.available: bool | None = None
        self._process: asyncio.subprocess.Process | None = None
        self._starting: asyncio.Task[asyncio.subprocess.Process | None] | None = None
        self._lock = asyncio.Lock()
        self._next_id = 0

    async def check(
        self, path: str, source: str, declared: dict[str, Any] | None = None
    ) -> list[Diagnostic] | None:
        """The shape diagnostics of one file; None when shape checks cannot run or failed."""
        result = await self.check_with_tables(path, source, declared)
        return result.diagnostics if result is not None else None

    async def check_with_tables(
        self, path: str, source: str, declared: dict[str, Any] | None = None
    ) -> ShapeResult | None:
        """The shape diagnostics of one file and its models' per-layer tables (shape insight);
        None when shape checks cannot run or failed."""
        async with self._lock:
            if self.available is False:
                return None
            if self._starting is None or (self._starting.done() and self._process is None):
                self._starting = asyncio.ensure_future(self._start())
            # Startup is shielded: a stale check should not waste the seconds torch takes.
            process = await asyncio.shield(self._starting)
            if process is None or process.stdin is None or process.stdout is None:
                return None
            self._next_id += 1
            request = {"id": self._next_id, "path": path, "source": source}
            if declared:
                request["declared"] = declared
            try:
                process.stdin.write(json.dumps(request).encode() + b"\n")
                await process.stdin.drain()
                line = await process.stdout.readline()
            except asyncio.CancelledError:
                self._kill()
                raise
            except (ConnectionError, OSError, ValueError) as exc:
                self.log(f"shape worker failed: {exc}")
                self._kill()
                return None
            if not line:
                self.log("shape worker exited unexpectedly; it restarts on the next check")
                self._kill()
                return None
            reply = json.loads(line)
            if "error" in reply:
                self.log(f"shape checks crashed on {path}:\n{reply['error']}")
                return None
            return ShapeResult(
                [Diagnostic.from_dict(d) for d in reply.get("diagnostics", [])],
                list(reply.get("tables") or []),
            )

    async def _start(self) -> asyncio.subprocess.Process | None:
        try:
            process = await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                "torchlint.server.shape_worker",
                self.target,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                limit=_LINE_LIMIT,
                # Its own process group, so that stopping it also stops the processes the
                # shape engine starts (it runs torch in a child of its own).
                start_new_session=os.name == "posix",
            )
            assert process.stdout is not None
            hello = json.loads(await process.stdout.readline() or b"{}")
        except Exception as exc:
            self.available = False
            self.log(f"shape checks are off: cannot start the worker ({exc})")
            return None
        if not hello.get("ready"):
            self.available = False
            self.log(f"shape checks are off: {hello.get('reason', 'the worker did not start')}")
            _kill_tree(process)
            await process.wait()
            return None
        self.available = True
        self._process = process
        return process

    def _kill(self) -> None:
        process, self._process, self._starting = self._process, None, None
        if process is not None and process.returncode is None:
            _kill_tree(process)

    def close(self) -> None:
        """Stop the worker (server shutdown)."""
        if self._starting is not None and not self._starting.done():
            self._starting.cancel()
        self._kill()

    async def aclose(self) -> None:
        """Stop the worker and wait until it is gone."""
        process = self._process
        self.close()
        if process is not None:
            await process.wait()


def _kill_tree(process: asyncio.subprocess.Process) -> None:
    """Kill the worker and, on POSIX, everything it started (its process group)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        if os.name == "posix":
            os.killpg(process.pid, signal.SIGKILL)
        else:
            process.kill()
