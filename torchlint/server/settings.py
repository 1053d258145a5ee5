"""What the server needs to know about one document: its enabled rules, from its configuration.

Configuration comes from the nearest `torchlint.toml` / `pyproject.toml` above the document
(`torchlint.config`), falling back to the default rules when there is none or it is invalid;
the client's `initializationOptions` only tune the server itself.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from torchlint.registry import all_rules
from torchlint.torch_version import target_torch_version

#: Configuration files; a change to one re-reads configuration and re-lints open documents.
CONFIG_FILE_NAMES = ("pyproject.toml", "torchlint.toml")
SHAPE_PREFIX = "TL6"


@dataclass(frozen=True)
class Options:
    """`initializationOptions` the client may send: `{"debounceMs": 30, "shapes": true,
    "trusted": true}`."""

    #: Quiet time after an edit before linting the buffer (edits in between coalesce).
    debounce_ms: int = 30
    #: False turns shape checks off in the editor whatever the configuration says.
    shapes: bool = True
    #: The editor's trust in the workspace (VS Code's `workspace.isTrusted`). Shape checks
    #: run the workspace's model constructors, so an untrusted workspace gets none. True
    #: when the client does not say: clients without a notion of trust are configured by
    #: their user for the folders they open.
    trusted: bool = True

    @classmethod
    def parse(cls, raw: object) -> Options:
        if not isinstance(raw, dict):
            return cls()
        debounce = raw.get("debounceMs", cls.debounce_ms)
        shapes = raw.get("shapes", cls.shapes)
        trusted = raw.get("trusted", cls.trusted)
        return cls(
            debounce_ms=max(0, int(debounce)) if isinstance(debounce, int | float) else 30,
            shapes=bool(shapes),
            trusted=bool(trusted),
        )

    @property
    def runs_shapes(self) -> bool:
        """Shape checks may run: wanted, in a trusted workspace, and not refused by the user
        (`TORCHLINT_NO_SHAPES=1` in the server's environment)."""
        from torchlint.shapes import refused_by_environment

        return self.shapes and self.trusted and not refused_by_environment()


@dataclass(frozen=True)
class DocumentSettings:
    enabled: frozenset[str]
    #: "auto" (when torch is importable), "on" or "off", from `shapes = ...`.
    shapes: str = "auto"
    declared_shapes: dict[str, Any] = field(default_factory=dict)
    excluded: bool = False
    #: Larger buffers are not analysed (`max-file-size-kb`, as on the command line).
    max_file_size_kb: int = 4096
    #: Why the configuration could not be used (the defaults apply instead).
    error: str | None = None
    #: The torch release the code targets (`torch-version`, else the installed torch).
    torch_version: str | None = field(default_factory=lambda: target_torch_version(None))

    @property
    def wants_shapes(self) -> bool:
        return (
            not self.excluded
            and self.shapes != "off"
            and any(code.startswith(SHAPE_PREFIX) for code in self.enabled)
        )


def default_codes() -> frozenset[str]:
    return frozenset(code for code, rule in all_rules().items() if rule.default_enabled)


def settings_for(path: Path | None, root: Path | None) -> DocumentSettings:
    """Settings for a document at `path` (None: an unsaved buffer, judged from `root`)."""
    target = path if path is not None else (root or Path.cwd()) / "untitled.py"
    try:
        from torchlint import config
    except ImportError:  # the configuration module is not there yet: defaults
        return DocumentSettings(default_codes())
    try:
        found = config.settings_for(target)
        if _changed_on_disk(getattr(found, "config_path", None)):
            config.clear_cache()
            found = config.settings_for(target)
        is_excluded = getattr(config, "is_excluded", None)
        excluded = path is not None and is_excluded is not None and is_excluded(path)
    except Exception as exc:  # an invalid configuration file must not stop linting
        return DocumentSettings(default_codes(), error=str(exc))
    table = getattr(found, "config", None)
    return DocumentSettings(
        enabled=frozenset(found.enabled),
        shapes=getattr(table, "shapes", "auto"),
        declared_shapes=dict(getattr(table, "declared_shapes", ())),
        excluded=bool(excluded),
        max_file_size_kb=getattr(table, "max_file_size_kb", DocumentSettings.max_file_size_kb),
        torch_version=target_torch_version(getattr(table, "torch_version", None)),
    )


_modified: dict[Path, int] = {}


def _changed_on_disk(path: Path | None) -> bool:
    """Whether a configuration file changed since the last lint that used it.

    One `stat` per lint: it catches edits made outside the editor for clients that cannot
    watch files for the server (no dynamic `workspace/didChangeWatchedFiles`).
    """
    if path is None:
        return False
    try:
        modified = path.stat().st_mtime_ns
    except OSError:
        modified = -1
    before = _modified.get(path)
    _modified[path] = modified
    return before is not None and before != modified


def forget_configuration() -> None:
    """Configuration files changed on disk: read them again next time."""
    try:
        from torchlint import config
    except ImportError:
        return
    clear = getattr(config, "clear_cache", None)
    if clear is not None:
        clear()


@cache
def shapes_installed() -> bool:
    """Whether torch and the shape engine can be imported, without importing them."""
    try:
        return (
            importlib.util.find_spec("torch") is not None
            and importlib.util.find_spec("torchlint.shapes") is not None
        )
    except (ImportError, ValueError):
        return False
