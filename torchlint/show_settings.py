"""`--show-settings`: the settings that apply to a path, and the file they come from."""

from __future__ import annotations

import json
from pathlib import Path

from torchlint.config import Overrides, settings_for


def _toml(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, tuple):
        return "[" + ", ".join(_toml(item) for item in value) + "]"
    if value is None:
        return '""  # not set'
    return json.dumps(value)


def _select_line(select: tuple[str, ...] | None) -> str:
    return (
        "# select: not set (the rules on by default)"
        if select is None
        else f"select = {_toml(select)}"
    )


def format_settings(path: Path, overrides: Overrides) -> str:
    """One `key = value` line per setting, as they apply to `path` (a file or folder)."""
    settings = settings_for(path, overrides)
    config = settings.config
    origin = str(config.path) if config.path else "defaults (no configuration file found)"
    lines = [
        f"# Settings for {path}",
        f"# from {origin}",
        *(f"# --config {setting}" for setting in overrides.settings),
        f"root = {_toml(str(config.root))}",
        f"enabled = {_toml(tuple(sorted(settings.enabled)))}",
        _select_line(overrides.select if overrides.select is not None else config.select),
        f"extend-select = {_toml(config.extend_select + overrides.extend_select)}",
        f"ignore = {_toml(config.ignore + overrides.ignore)}",
        f"exclude = {_toml(config.exclude)}",
        f"extend-exclude = {_toml(config.extend_exclude + overrides.extend_exclude)}",
        f"include = {_toml(config.include)}",
        f"extend-include = {_toml(config.extend_include)}",
        f"respect-gitignore = {_toml(config.respect_gitignore)}",
        f"shapes = {_toml(overrides.shapes or config.shapes)}",
        f"max-file-size-kb = {config.max_file_size_kb}",
        f"torch-version = {_toml(config.torch_version)}",
    ]
    if config.per_file_ignores:
        lines.append("[per-file-ignores]")
        lines += [
            f"{_toml(pattern)} = {_toml(codes)}" for pattern, codes in config.per_file_ignores
        ]
    return "\n".join(lines) + "\n"
