"""Which torch release the linted code targets: the setting, else the installed torch."""

from __future__ import annotations

import functools
import importlib.metadata


def target_torch_version(configured: str | None) -> str | None:
    """The `torch-version` setting when given, else the version of the torch installed next
    to torchlint (read from package metadata: torch is never imported), else None."""
    return configured or installed_torch_version()


@functools.cache
def installed_torch_version() -> str | None:
    try:
        return importlib.metadata.version("torch")
    except Exception:  # no torch, or broken metadata: linting goes on without it
        return None
