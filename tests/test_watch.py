"""`--watch` checks again after a file changes (bounded waits, no timing assertions)."""

from __future__ import annotations

import os
import queue
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.conftest import BUGGY, CLEAN

pytest.importorskip("watchfiles")

WAIT = 90.0


def _lines(stream, into: queue.Queue[str]) -> None:
    for line in iter(stream.readline, ""):
        into.put(line)


def _wait_for(lines: queue.Queue[str], text: str, *, poke=None) -> None:
    deadline = time.monotonic() + WAIT
    while time.monotonic() < deadline:
        try:
            if text in lines.get(timeout=0.5):
                return
        except queue.Empty:
            if poke is not None:
                poke()
    pytest.fail(f"--watch did not print {text!r} within {WAIT:.0f} s")


def test_watch_checks_again_after_a_change(tmp_path: Path) -> None:
    target = tmp_path / "m.py"
    target.write_text(CLEAN)
    process = subprocess.Popen(
        [sys.executable, "-m", "torchlint", ".", "--watch", "--no-cache"],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env={**os.environ, "NO_COLOR": "1"},
    )
    lines: queue.Queue[str] = queue.Queue()
    threading.Thread(target=_lines, args=(process.stdout, lines), daemon=True).start()
    try:
        _wait_for(lines, "All checks passed!")
        # The watcher may start just after the first report: write until a new check shows it.
        _wait_for(lines, "m.py:5:28: TL101", poke=lambda: target.write_text(BUGGY))
    finally:
        process.terminate()
        process.wait(timeout=30)


def test_watch_without_watchfiles_is_a_clear_error(tmp_path: Path) -> None:
    from tests.conftest import run_cli

    block = (
        "import sys\n"
        "class _B:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name == 'watchfiles':\n"
        "            raise ImportError('blocked')\n"
        "sys.meta_path.insert(0, _B())\n"
    )
    result = run_cli(".", "--watch", cwd=tmp_path, prelude=block)
    assert result.returncode == 2
    assert "pip install watchfiles" in result.stderr
