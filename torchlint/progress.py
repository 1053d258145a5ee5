"""A live status line on a terminal's standard error while a long run goes on.

It appears after about a second (short runs never show it), says how far the run is, and is
erased when the run ends, so what stays on the screen is the same as without it.
"""

from __future__ import annotations

import os
import threading
import time
from typing import TextIO

_CLEAR = "\r\x1b[K"
# Seconds before the line first appears; tests set 0 to see it on any run.
_DELAY_VARIABLE = "TORCHLINT_PROGRESS_DELAY"


class ProgressLine:
    """Draws `torchlint: 120/2544 files, 3.2 s` and redraws it as the run advances."""

    def __init__(
        self, stream: TextIO, *, delay: float | None = None, interval: float = 0.25
    ) -> None:
        self._stream = stream
        self._interval = interval
        self._delay = float(os.environ.get(_DELAY_VARIABLE, "1.0")) if delay is None else delay
        self._started = time.monotonic()
        self._lock = threading.Lock()
        self._state: tuple[str, int, int] | None = None
        self._files = ""
        self._drawn = False
        self._last = 0.0
        self._stop = threading.Event()
        self._ticker = threading.Thread(target=self._tick, daemon=True)
        self._ticker.start()

    def update(self, stage: str, done: int, total: int) -> None:
        """Record progress: stage "files" (linted so far) or "shapes" (files
        to check, then files checked out of those with models)."""
        with self._lock:
            new_stage = self._state is None or self._state[0] != stage
            self._state = (stage, done, total)
            if stage == "files":  # kept even when not drawn: the shape stage shows it
                self._files = f"{done}/{total} files"
            now = time.monotonic()
            due = new_stage or now - self._last >= self._interval
            if due and now - self._started >= self._delay:
                self._draw(now)

    def close(self) -> None:
        """Stop redrawing and erase the line."""
        self._stop.set()
        self._ticker.join()
        with self._lock:
            if self._drawn:
                self._stream.write(_CLEAR)
                self._stream.flush()
                self._drawn = False

    def _tick(self) -> None:
        # Keeps the elapsed time moving through stages that report nothing for a while.
        if self._stop.wait(self._delay):
            return
        while not self._stop.is_set():
            with self._lock:
                self._draw(time.monotonic())
            self._stop.wait(self._interval)

    def _draw(self, now: float) -> None:
        stage, done, total = self._state or ("", 0, 0)
        if not stage:
            text = "finding and reading files"
        elif stage == "files":
            text = self._files
        elif done:
            text = f"{self._files}, shape-checked {done}/{total} files"
        else:
            text = f"{self._files}, shape-checking {total} file{'s' if total != 1 else ''}"
        self._stream.write(f"{_CLEAR}torchlint: {text}, {now - self._started:.1f} s")
        self._stream.flush()
        self._drawn = True
        self._last = now
