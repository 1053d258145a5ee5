"""`--watch`: check once, then again whenever a Python file, notebook or configuration changes."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from pathlib import Path

from torchlint.config import clear_cache
from torchlint.errors import TorchlintError

_WATCHED_SUFFIXES = (".py", ".pyi", ".ipynb", ".toml")


def _relevant(_change: object, path: str) -> bool:
    return path.endswith(_WATCHED_SUFFIXES) and "/.torchlint_cache/" not in path


def watch(paths: list[Path], check: Callable[[], int]) -> int:
    """Run `check` now and after every change under `paths`, until interrupted."""
    try:
        import watchfiles
    except ImportError:
        raise TorchlintError(
            "--watch needs the watchfiles package: pip install watchfiles"
            ' (or pip install "torchlint[watch]")'
        ) from None
    existing = [path for path in paths if path.exists()]
    if not existing:
        raise TorchlintError("--watch: none of the given paths exists")
    _announce("checking")
    _run(check)
    try:
        for changes in watchfiles.watch(*existing, watch_filter=_relevant, raise_interrupt=False):
            clear_cache()
            count = len({path for _, path in changes})
            _announce(f"{count} file{'s' if count != 1 else ''} changed, checking again")
            _run(check)
    except KeyboardInterrupt:
        pass
    return 0


def _run(check: Callable[[], int]) -> None:
    # A configuration error or a missing file is reported and the watch goes on.
    try:
        check()
    except TorchlintError as exc:
        print(f"error: {exc}", file=sys.stderr)
    sys.stdout.flush()


def _announce(what: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] torchlint --watch: {what}", file=sys.stderr, flush=True)
