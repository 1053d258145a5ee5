"""Which torch release the linted code targets: the setting, else the installed torch."""

from __future__ import annotations

import functools
import importlib.util
import os


def target_torch_version(configured: str | None) -> str | None:
    """The `torch-version` setting when given, else the version of the torch installed next
    to torchlint (read from package metadata: torch is never imported), else None."""
    return configured or installed_torch_version()


@functools.cache
def installed_torch_version() -> str | None:
    found = _version_beside_torch()
    if found is not None:
        return found
    try:  # importlib.metadata costs a tenth of a second to import: only when needed
        import importlib.metadata

        return importlib.metadata.version("torch")
    except Exception:  # no torch, or broken metadata: linting goes on without it
        return None


def _version_beside_torch() -> str | None:
    """The version in the metadata installed beside the importable torch package (the
    `torch-X.dist-info` folder next to it), found without importing `importlib.metadata`."""
    try:
        spec = importlib.util.find_spec("torch")
    except (ImportError, ValueError):
        return None
    if spec is None or spec.origin is None:
        return None
    site = os.path.dirname(os.path.dirname(spec.origin))
    try:
        names = [n for n in os.listdir(site) if n.startswith("torch-") and n.endswith(".dist-info")]
    except OSError:
        return None
    if len(names) != 1:
        return None
    try:
        with open(os.path.join(site, names[0], "METADATA"), encoding="utf-8") as handle:
            for line in handle:
                if not line.strip():
                    break
                if line.startswith("Version:"):
                    return line.partition(":")[2].strip() or None
    except OSError:
        pass
    return None
