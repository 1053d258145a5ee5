"""The live progress line: on a terminal's standard error only, erased at the end, silenced
by --quiet. Standard error is a pseudo-terminal here; the line's one-second delay is set to 0
so that any run shows it."""

from __future__ import annotations

import os
import pty
import subprocess
import sys
from pathlib import Path

from tests.conftest import BUGGY, CLEAN, run_cli

CLEAR = b"\r\x1b[K"


def _run_on_a_terminal(*args: str, cwd: Path) -> tuple[str, bytes, int]:
    """(stdout, what reached the terminal on stderr, exit code)."""
    master, slave = pty.openpty()
    env = {**os.environ, "TORCHLINT_PROGRESS_DELAY": "0", "NO_COLOR": "1"}
    process = subprocess.Popen(
        [sys.executable, "-m", "torchlint", *args],
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=slave,
        env=env,
    )
    os.close(slave)
    terminal = b""
    while True:
        try:
            chunk = os.read(master, 4096)
        except OSError:  # the other end closed: the process has exited
            break
        if not chunk:
            break
        terminal += chunk
    os.close(master)
    assert process.stdout is not None
    stdout = process.stdout.read().decode()
    return stdout, terminal, process.wait(timeout=300)


def _project(tmp_path: Path) -> Path:
    for i in range(3):
        (tmp_path / f"m{i}.py").write_text(BUGGY if i == 0 else CLEAN)
    return tmp_path


def test_progress_line_on_a_terminal_is_erased_at_the_end(tmp_path: Path) -> None:
    project = _project(tmp_path)
    stdout, terminal, code = _run_on_a_terminal(".", "--no-cache", cwd=project)
    assert code == 1
    assert b"torchlint: " in terminal and b"/3 files" in terminal
    last_draw = terminal.rindex(b"torchlint: ")
    assert CLEAR in terminal[last_draw:], terminal  # erased after its last update
    # Standard output is what it is without a terminal.
    assert stdout == run_cli(".", "--no-cache", cwd=project).stdout


def test_no_progress_line_when_quiet_or_not_a_terminal(tmp_path: Path) -> None:
    project = _project(tmp_path)
    _, terminal, _ = _run_on_a_terminal(".", "--no-cache", "--quiet", cwd=project)
    assert b"torchlint: " not in terminal and CLEAR not in terminal
    piped = run_cli(".", "--no-cache", cwd=project, env={"TORCHLINT_PROGRESS_DELAY": "0"})
    assert "torchlint: " not in piped.stderr and "\x1b[K" not in piped.stderr


def test_progress_line_counts_files_and_shape_stage() -> None:
    import io

    from torchlint.progress import ProgressLine

    stream = io.StringIO()
    line = ProgressLine(stream, delay=0)
    line.update("files", 2, 5)
    line.update("shapes", 0, 1)
    line.close()
    text = stream.getvalue()
    assert "torchlint: 2/5 files, " in text
    assert "torchlint: 2/5 files, shape-checking 1 file, " in text
    assert text.endswith("\r\x1b[K")


def test_progress_line_counts_shape_checked_files_and_keeps_the_last_file_count() -> None:
    import io

    from torchlint.progress import ProgressLine

    stream = io.StringIO()
    line = ProgressLine(stream, delay=0, interval=60.0)
    line.update("files", 1, 5)
    line.update("files", 5, 5)  # not drawn (too soon), still counted
    line.update("shapes", 0, 4)
    line._draw(0.0)
    line.update("shapes", 3, 4)
    line._draw(0.0)
    line.close()
    text = stream.getvalue()
    assert "torchlint: 5/5 files, shape-checking 4 files, " in text
    assert "torchlint: 5/5 files, shape-checked 3/4 files, " in text
