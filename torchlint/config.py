"""Settings: `[tool.torchlint]` in the nearest pyproject.toml (or torchlint.toml) above a file.

A `Config` is one file's table, validated; `FileSettings` is what applies to one linted file
once command-line overrides and per-file-ignores are folded in. Both are plain values.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from functools import cache
from pathlib import Path
from typing import Any

from torchlint.errors import TorchlintError
from torchlint.path_patterns import PathPatterns
from torchlint.selection import enabled_codes, validate

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

DEFAULT_EXCLUDES = (
    ".bzr",
    ".direnv",
    ".eggs",
    ".git",
    ".hg",
    ".ipynb_checkpoints",
    ".mypy_cache",
    ".nox",
    ".ruff_cache",
    ".svn",
    ".tox",
    ".torchlint_cache",
    ".venv",
    "__pycache__",
    "__pypackages__",
    "build",
    "dist",
    "node_modules",
    "site-packages",
    "venv",
)
DEFAULT_INCLUDE = ("*.py", "*.pyi", "*.ipynb")
DEFAULT_MAX_FILE_SIZE_KB = 4096
_KEYS = {
    "select",
    "ignore",
    "extend-select",
    "exclude",
    "extend-exclude",
    "include",
    "extend-include",
    "per-file-ignores",
    "shapes",
    "max-file-size-kb",
    "torch-version",
    "respect-gitignore",
}
# Keys a table may use beside the settings: `extend` names a base file to build on.
_EXTEND = "extend"
# Keys whose values add to an extended base's instead of replacing them.
_ADDITIVE = ("extend-select", "extend-exclude", "extend-include")
_SHAPES_SWITCH = {"auto": "auto", True: "on", False: "off", "true": "on", "false": "off"}


@dataclass(frozen=True)
class Config:
    """One configuration table, validated; `root` is the folder its patterns are relative to."""

    root: Path
    path: Path | None = None
    select: tuple[str, ...] | None = None
    ignore: tuple[str, ...] = ()
    extend_select: tuple[str, ...] = ()
    exclude: tuple[str, ...] = DEFAULT_EXCLUDES
    extend_exclude: tuple[str, ...] = ()
    include: tuple[str, ...] = DEFAULT_INCLUDE
    extend_include: tuple[str, ...] = ()
    per_file_ignores: tuple[tuple[str, tuple[str, ...]], ...] = ()
    shapes: str = "auto"
    declared_shapes: tuple[tuple[str, Any], ...] = ()
    max_file_size_kb: int = DEFAULT_MAX_FILE_SIZE_KB
    torch_version: str | None = None
    respect_gitignore: bool = True

    @property
    def exclude_spec(self) -> PathPatterns:
        return _spec(self.exclude + self.extend_exclude)


@dataclass(frozen=True)
class Overrides:
    """Command-line settings, applied on top of every file's configuration."""

    select: tuple[str, ...] | None = None
    extend_select: tuple[str, ...] = ()
    ignore: tuple[str, ...] = ()
    extend_exclude: tuple[str, ...] = ()
    shapes: str | None = None
    config_file: Path | None = None
    #: `--config KEY=VALUE` settings (TOML), applied over every configuration file's.
    settings: tuple[str, ...] = ()
    #: `--torch-version`, over every configuration's `torch-version`.
    torch_version: str | None = None


@dataclass(frozen=True)
class FileSettings:
    """What applies to one file: the enabled codes, and where they came from."""

    enabled: frozenset[str]
    config: Config = field(compare=False)

    @property
    def config_path(self) -> Path | None:
        return self.config.path


@cache
def _spec(patterns: tuple[str, ...]) -> PathPatterns:
    return PathPatterns(patterns)


def _string_list(value: object, key: str, where: Path | str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise TorchlintError(f"{where}: `{key}` must be a list of strings")
    return tuple(value)


def parse_config(table: dict[str, Any], path: Path | None, root: Path) -> Config:
    """Validate a `[tool.torchlint]` table; unknown keys and codes are errors naming the file."""
    return replace(Config(root=root, path=path), **_parse_values(table, path or root))


def _parse_values(table: dict[str, Any], where: Path | str) -> dict[str, Any]:
    """The `Config` fields a table sets, validated; errors name `where`."""
    unknown = sorted(set(table) - _KEYS)
    if unknown:
        raise TorchlintError(
            f"{where}: unknown key {unknown[0]!r} in [tool.torchlint]"
            f" (known keys: {', '.join(sorted(_KEYS | {_EXTEND}))})"
        )
    values: dict[str, Any] = {}
    for key in ("select", "ignore", "extend-select"):
        if key in table:
            values[key.replace("-", "_")] = validate(
                _string_list(table[key], key, where), f"`{key}` of {where}"
            )
    for key in ("exclude", "extend-exclude", "include", "extend-include"):
        if key in table:
            values[key.replace("-", "_")] = _string_list(table[key], key, where)
    if "per-file-ignores" in table:
        raw = table["per-file-ignores"]
        if not isinstance(raw, dict):
            raise TorchlintError(f"{where}: `per-file-ignores` must be a table of glob = [codes]")
        values["per_file_ignores"] = tuple(
            (
                pattern,
                validate(
                    _string_list(codes, f"per-file-ignores.{pattern}", where),
                    f"`per-file-ignores` of {where}",
                ),
            )
            for pattern, codes in raw.items()
        )
    if "shapes" in table:
        values.update(_parse_shapes(table["shapes"], where))
    if "max-file-size-kb" in table:
        size = table["max-file-size-kb"]
        if not isinstance(size, int) or size <= 0:
            raise TorchlintError(f"{where}: `max-file-size-kb` must be a positive integer")
        values["max_file_size_kb"] = size
    if "torch-version" in table:
        if not isinstance(table["torch-version"], str):
            raise TorchlintError(f'{where}: `torch-version` must be a string such as "2.1"')
        values["torch_version"] = table["torch-version"]
    if "respect-gitignore" in table:
        if not isinstance(table["respect-gitignore"], bool):
            raise TorchlintError(f"{where}: `respect-gitignore` must be true or false")
        values["respect_gitignore"] = table["respect-gitignore"]
    return values


def _parse_shapes(value: object, where: Path | str) -> dict[str, Any]:
    """`shapes = "auto" | true | false`, or a table of declared inputs with optional `enabled`."""
    if isinstance(value, dict):
        declared = dict(value)
        switch = declared.pop("enabled", "auto")
        result = _parse_shapes(switch, where)
        for target, entry in declared.items():
            if ":" not in target or not isinstance(entry, dict):
                raise TorchlintError(
                    f'{where}: [tool.torchlint.shapes] entries look like "pkg.module:Class" ='
                    f" {{ input-shape = [...] }}; got {target!r}"
                )
        result["declared_shapes"] = tuple(sorted(declared.items()))
        return result
    if value not in _SHAPES_SWITCH:
        raise TorchlintError(f'{where}: `shapes` must be "auto", true or false')
    return {"shapes": _SHAPES_SWITCH[value]}


def load_config_file(path: Path) -> Config | None:
    """The config in a pyproject.toml (None if it has no [tool.torchlint]) or torchlint.toml."""
    table = _read_table(path, ())
    return None if table is None else parse_config(table, path, path.parent)


def _read_table(path: Path, extended_by: tuple[Path, ...]) -> dict[str, Any] | None:
    """A file's torchlint table, with the base it names in `extend` folded in beneath it."""
    try:
        with path.open("rb") as handle:
            data = tomllib.load(handle)
    except tomllib.TOMLDecodeError as exc:
        raise TorchlintError(f"{path}: invalid TOML: {exc}") from None
    except OSError as exc:
        raise TorchlintError(f"{path}: cannot read: {exc.strerror}") from None
    if path.name == "pyproject.toml":
        table = data.get("tool", {}).get("torchlint")
        if table is None:
            return None
    else:
        table = data
    if not isinstance(table, dict):
        raise TorchlintError(f"{path}: [tool.torchlint] must be a table")
    if _EXTEND not in table:
        return table
    table = dict(table)
    base_name = table.pop(_EXTEND)
    if not isinstance(base_name, str):
        raise TorchlintError(f'{path}: `extend` must be a path such as "../pyproject.toml"')
    base_path = (path.parent / os.path.expanduser(base_name)).resolve()
    if base_path in extended_by or base_path == path.resolve():
        raise TorchlintError(f"{path}: `extend` makes a cycle through {base_path}")
    if not base_path.is_file():
        raise TorchlintError(f"{path}: `extend` names {base_path}, which does not exist")
    base = _read_table(base_path, (*extended_by, path.resolve()))
    if base is None:
        raise TorchlintError(f"{path}: `extend` names {base_path}, which has no [tool.torchlint]")
    merged = {**base, **table}
    for key in _ADDITIVE:
        if key in base and key in table:
            merged[key] = [*base[key], *table[key]]
    if "per-file-ignores" in base and "per-file-ignores" in table:
        merged["per-file-ignores"] = {**base["per-file-ignores"], **table["per-file-ignores"]}
    return merged


@cache
def _config_in(directory: Path) -> Config | None:
    for name in ("torchlint.toml", "pyproject.toml"):
        candidate = directory / name
        if candidate.is_file():
            config = load_config_file(candidate)
            if config is not None:
                return config
    return None


@cache
def find_config(directory: Path) -> Config | None:
    """The nearest configuration at or above `directory`."""
    config = _config_in(directory)
    if config is None and directory.parent != directory:
        return find_config(directory.parent)
    return config


def clear_cache() -> None:
    """Forget configuration files read so far (they changed on disk)."""
    _config_in.cache_clear()
    find_config.cache_clear()
    _directory_config.cache_clear()
    _real_directory.cache_clear()
    _enabled.cache_clear()
    _explicit_config.cache_clear()
    _OVERRIDDEN.clear()


def config_for(path: Path, overrides: Overrides | None = None) -> Config:
    """The configuration governing `path` (a file or folder), or the defaults rooted at cwd."""
    overrides = overrides or Overrides()
    if overrides.config_file is not None:
        config = _explicit_config(overrides.config_file.resolve())
    else:
        absolute = os.path.abspath(path)
        directory = absolute if os.path.isdir(absolute) else os.path.dirname(absolute)
        config = _directory_config(directory)
    if overrides.settings or overrides.torch_version:
        return _overridden(config, overrides.settings, overrides.torch_version)
    return config


# Configurations with command-line settings applied, by the identity of the file's Config
# (Configs are cached, and kept alive here with their overridden value).
_OVERRIDDEN: dict[tuple[int, tuple[str, ...], str | None], tuple[Config, Config]] = {}


def _overridden(config: Config, settings: tuple[str, ...], torch_version: str | None) -> Config:
    key = (id(config), settings, torch_version)
    if key not in _OVERRIDDEN:
        values = command_line_settings(settings)
        if torch_version is not None:
            values["torch_version"] = torch_version
        _OVERRIDDEN[key] = (config, replace(config, **values))
    return _OVERRIDDEN[key][1]


@cache
def command_line_settings(settings: tuple[str, ...]) -> dict[str, Any]:
    """The `Config` fields set by `--config KEY=VALUE` options, each one line of TOML."""
    values: dict[str, Any] = {}
    for setting in settings:
        try:
            table = tomllib.loads(setting)
        except tomllib.TOMLDecodeError:
            raise TorchlintError(
                f"--config {setting!r}: not a KEY = VALUE line of TOML"
                " (strings need quotes: --config 'select = [\"TL1\"]')"
            ) from None
        if _EXTEND in table:
            raise TorchlintError(f"--config {setting!r}: use --config FILE to name a file")
        values.update(_parse_values(table, f"--config {setting!r}"))
    return values


@cache
def _directory_config(directory: str) -> Config:
    # Resolved once per folder: resolving every file's path costs a stat per component.
    return find_config(Path(_real_directory(directory))) or Config(root=Path.cwd())


@cache
def _real_directory(directory: str) -> str:
    """An absolute folder with its links resolved, from its parent's answer: one `lstat`
    per folder of a walk, not one per component of each."""
    parent = os.path.dirname(directory)
    if parent == directory or os.path.islink(directory):
        return os.path.realpath(directory)
    return os.path.join(_real_directory(parent), os.path.basename(directory))


@cache
def _explicit_config(path: Path) -> Config:
    config = load_config_file(path)
    if config is None:
        raise TorchlintError(f"{path}: no [tool.torchlint] table")
    return config


def settings_for(path: Path, overrides: Overrides | None = None) -> FileSettings:
    """The settings that apply to one file."""
    overrides = overrides or Overrides()
    config = config_for(path, overrides)
    relative = _relative(path, config)
    select = overrides.select if overrides.select is not None else config.select
    ignore = config.ignore + overrides.ignore
    for pattern, codes in config.per_file_ignores:
        if _spec((pattern,)).match_file(relative):
            ignore += codes
    codes = _enabled(select, config.extend_select + overrides.extend_select, ignore)
    return FileSettings(enabled=codes, config=config)


@cache
def _enabled(
    select: tuple[str, ...] | None, extend_select: tuple[str, ...], ignore: tuple[str, ...]
) -> frozenset[str]:
    return enabled_codes(select, extend_select, ignore)


def _relative(path: Path, config: Config, within: Path | None = None) -> str:
    """`path` relative to the configuration's folder, else to `within`, else its name.

    Matching excludes against what lies outside the project would exclude a folder the user
    named explicitly (`torchlint .../site-packages/torch` must check what is in it).
    """
    absolute = os.path.abspath(path)
    for base in (str(config.root), os.path.abspath(within) if within is not None else None):
        if base is not None and absolute.startswith(base.rstrip(os.sep) + os.sep):
            return Path(absolute[len(base.rstrip(os.sep)) + 1 :]).as_posix()
    return os.path.basename(absolute)


def is_excluded(
    path: Path, overrides: Overrides | None = None, *, within: Path | None = None
) -> bool:
    """Whether configured (or default) excludes cover `path`, by any of its components.

    Paths are matched relative to the configuration's folder, or to `within` (the folder being
    walked) for paths outside it.
    """
    overrides = overrides or Overrides()
    config = config_for(path, overrides)
    spec = _spec(config.exclude + config.extend_exclude + overrides.extend_exclude)
    relative = _excludable(path, config, spec, within)
    return _covered(relative, spec)


def _covered(relative: str, spec: PathPatterns) -> bool:
    """Whether `spec` excludes the relative path itself or one of its folders."""
    return spec.match_file(relative) or any(
        spec.match_file(part + "/") for part in _parents(relative)
    )


def _excludable(path: Path, config: Config, spec: PathPatterns, within: Path | None) -> str:
    """`path` as excludes see it (`_relative`), except below a folder the user named that
    the excludes cover: then relative to that folder, which is checked as named
    (`torchlint .venv/lib/python3.12/site-packages/transformers`), ruff's way."""
    if within is not None:
        named = _relative(within, config)
        inside = os.path.abspath(within).startswith(str(config.root).rstrip(os.sep) + os.sep)
        if inside and _covered(named + "/", spec):
            base = os.path.abspath(within).rstrip(os.sep) + os.sep
            absolute = os.path.abspath(path)
            if absolute.startswith(base):
                return Path(absolute[len(base) :]).as_posix()
    return _relative(path, config, within)


def is_included(path: Path, overrides: Overrides | None = None) -> bool:
    """Whether a file found in a folder walk is one to lint (`include`, `extend-include`)."""
    config = config_for(path, overrides)
    spec = _spec(config.include + config.extend_include)
    return spec.match_file(path.name) or spec.match_file(_relative(path, config))


def _parents(relative: str) -> list[str]:
    parts = relative.split("/")[:-1]
    return ["/".join(parts[: i + 1]) for i in range(len(parts))]


def file_filter(
    directory: Path, overrides: Overrides | None = None, *, within: Path | None = None
) -> Callable[[str], bool]:
    """Whether a file of `directory`, given by name, is one to lint in a folder walk.

    The same answer as `is_included` and not `is_excluded` (with `within`), with what
    depends on the folder alone (its configuration, whether a parent is excluded) decided
    once for all its files.
    """
    overrides = overrides or Overrides()
    config = config_for(directory, overrides)
    include = _spec(config.include + config.extend_include)
    exclude = _spec(config.exclude + config.extend_exclude + overrides.extend_exclude)
    # `_relative` of a file in the folder, less the file's own name.
    included_prefix = _relative(directory / "_", config)[:-1]
    excluded_prefix = _excludable(directory / "_", config, exclude, within)[:-1]
    parent_excluded = any(
        exclude.match_file(part + "/") for part in _parents(excluded_prefix + "_")
    )

    def wanted(name: str) -> bool:
        if not (include.match_file(name) or include.match_file(included_prefix + name)):
            return False
        return not (parent_excluded or exclude.match_file(excluded_prefix + name))

    return wanted
