"""Which files a run checks: walk the given paths, honouring excludes and .gitignore."""

from __future__ import annotations

import errno
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from torchlint.config import Overrides, config_for, file_filter, is_excluded

if TYPE_CHECKING:
    import pathspec


@dataclass
class Discovery:
    """The files to check, and problems met on the way (each a one-line message)."""

    files: list[Path] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class _Ignore:
    base: Path
    spec: pathspec.GitIgnoreSpec


def discover(
    paths: list[Path],
    overrides: Overrides | None = None,
    *,
    force_exclude: bool = False,
) -> Discovery:
    """Files under `paths`. Explicit files are kept unless `force_exclude` and excluded."""
    result = Discovery()
    seen: set[Path] = set()
    for path in paths:
        if not os.path.lexists(path):
            result.warnings.append(f"{path}: no such file or directory")
        elif path.is_dir():
            _walk(path, overrides, result, seen)
        elif not (force_exclude and is_excluded(path, overrides)) and path not in seen:
            seen.add(path)
            result.files.append(path)
    return result


def _walk(root: Path, overrides: Overrides | None, result: Discovery, seen: set[Path]) -> None:
    visited_dirs: set[tuple[int, int]] = set()
    respect_gitignore = config_for(root, overrides).respect_gitignore
    ignores = _ancestor_gitignores(root) if respect_gitignore else []
    if _ignored(root, ignores, True):
        ignores = []  # the user named an ignored folder: lint it, honouring only its own files
    stack: list[tuple[Path, list[_Ignore]]] = [(root, ignores)]
    exclude_cache: dict[Path, bool] = {}
    while stack:
        directory, inherited = stack.pop()
        try:
            info = directory.stat()
        except OSError as exc:
            result.warnings.append(f"{directory}: cannot read: {exc.strerror}")
            continue
        key = (info.st_dev, info.st_ino)
        if key in visited_dirs:
            if directory.is_symlink():
                result.warnings.append(f"{directory}: symbolic link loop, not followed")
            continue
        visited_dirs.add(key)
        try:
            entries = sorted(os.scandir(directory), key=lambda e: e.name)
        except OSError as exc:
            result.warnings.append(f"{directory}: cannot list: {exc.strerror}")
            continue
        ignores = inherited
        if respect_gitignore and any(e.name == ".gitignore" for e in entries):
            ignores = inherited + _gitignore_in(directory)
        subdirs = []
        wanted = file_filter(directory, overrides, within=root)
        for entry in entries:
            try:
                is_dir = entry.is_dir()
            except OSError:
                is_dir = False
            if not is_dir and not wanted(entry.name):
                continue
            path = Path(entry.path)
            if not is_dir and entry.is_symlink() and _is_link_loop(path):
                result.warnings.append(f"{path}: symbolic link loop, not followed")
                continue
            if is_dir:
                if not _ignored(path, ignores, True) and not _excluded(
                    path, overrides, root, exclude_cache
                ):
                    subdirs.append(path)
                continue
            if path not in seen and not _ignored(path, ignores, False):
                seen.add(path)
                result.files.append(path)
        stack.extend((d, ignores) for d in reversed(subdirs))


def _is_link_loop(path: Path) -> bool:
    try:
        path.stat()
    except OSError as exc:
        return exc.errno == errno.ELOOP
    return False


def _excluded(path: Path, overrides: Overrides | None, root: Path, cache: dict[Path, bool]) -> bool:
    if path not in cache:
        cache[path] = is_excluded(path / "__dir__", overrides, within=root)
    return cache[path]


def _gitignore_in(directory: Path) -> list[_Ignore]:
    gitignore = directory / ".gitignore"
    try:
        lines = gitignore.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return []
    import pathspec  # only where there is a .gitignore

    return [_Ignore(directory, pathspec.GitIgnoreSpec.from_lines(lines))]


def _ancestor_gitignores(root: Path) -> list[_Ignore]:
    """.gitignore files above `root`, up to the repository's top, outermost first; none
    outside a repository."""
    start = root.resolve().parent
    top = next((folder for folder in (start, *start.parents) if (folder / ".git").exists()), None)
    if top is None:
        return []
    found: list[_Ignore] = []
    for folder in (start, *start.parents):
        found = _gitignore_in(folder) + found
        if folder == top:
            return found
    return found


def _ignored(path: Path, ignores: list[_Ignore], is_dir: bool) -> bool:
    """Git's rule: the last matching pattern, deepest .gitignore last, decides."""
    verdict = False
    if not ignores:
        return verdict
    absolute = Path(os.path.realpath(path)) if path.is_symlink() else path.absolute()
    for ignore in ignores:
        try:
            relative = absolute.relative_to(ignore.base.absolute()).as_posix()
        except ValueError:
            try:
                relative = path.absolute().relative_to(ignore.base.absolute()).as_posix()
            except ValueError:
                continue
        result = ignore.spec.check_file(relative + ("/" if is_dir else ""))
        if result.include is not None:
            verdict = result.include
    return verdict
