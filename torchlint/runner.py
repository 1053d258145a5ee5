"""A whole run: discover files, serve unchanged ones from the cache, lint the rest in parallel.

Shape checks (TL6xx) run after the source rules, in one separate worker process, only when
torch is importable and they are enabled.
"""

from __future__ import annotations

import difflib
import hashlib
import importlib.metadata
import multiprocessing
import os
import sys
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from torchlint.cache import CACHE_DIR_NAME, ResultCache, cache_key
from torchlint.config import FileSettings, Overrides, settings_for
from torchlint.diagnostic import Diagnostic
from torchlint.discovery import discover
from torchlint.engine import SYNTAX_ERROR, file_error
from torchlint.errors import TorchlintError
from torchlint.fixing import FileChangedError, applicable, apply_edits, write_atomically
from torchlint.inputs import fix_input, lint_input, map_diagnostics, python_source
from torchlint.noqa import apply_suppressions

SHAPE_PREFIX = "TL6"
# Below this many files to lint, starting worker processes costs more than it saves.
_PARALLEL_THRESHOLD = 16


@dataclass(frozen=True)
class RunOptions:
    jobs: int | None = None
    use_cache: bool = True
    force_exclude: bool = False
    cache_dir: Path | None = None
    #: None to only report, "fix" to write fixes, "diff" to show them without writing.
    fix_mode: str | None = None
    unsafe_fixes: bool = False


@dataclass
class RunResult:
    diagnostics: list[Diagnostic] = field(default_factory=list)
    files: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    #: How many files were served from the cache.
    cached: int = 0
    #: How many diagnostics fixes resolved (`--fix`, `--diff`).
    fixed: int = 0
    #: Unified diffs of the fixes (`--diff`), or the fixed text of standard input (`--fix`).
    fixed_text: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class _Task:
    display: str
    path: Path | None
    data: bytes
    settings: FileSettings
    key: str


def display_path(path: Path) -> str:
    """The path as users see it: relative to the working directory when under it."""
    try:
        return path.absolute().relative_to(Path.cwd()).as_posix()
    except ValueError:
        return str(path)


def run(paths: list[Path], overrides: Overrides, options: RunOptions) -> RunResult:
    """Lint every file under `paths`."""
    found = discover(paths, overrides, force_exclude=options.force_exclude)
    result = RunResult(warnings=list(found.warnings))
    cache = ResultCache(options.cache_dir or Path.cwd() / CACHE_DIR_NAME, enabled=options.use_cache)
    tasks: list[_Task] = []
    for path in found.files:
        display = display_path(path)
        result.files.append(display)
        settings = settings_for(path, overrides)
        limit = settings.config.max_file_size_kb * 1024
        try:
            size = path.stat().st_size
            if size > limit:
                result.warnings.append(
                    f"{display}: skipped, {size / 1e6:.1f} MB is over max-file-size-kb"
                    f" ({settings.config.max_file_size_kb})"
                )
                continue
            data = path.read_bytes()
        except OSError as exc:
            if SYNTAX_ERROR in settings.enabled:
                reason = exc.strerror or type(exc).__name__
                result.diagnostics.append(file_error(display, f"cannot read file: {reason}"))
            continue
        key = cache_key(data, settings.enabled, settings.config.torch_version or "")
        tasks.append(_Task(display, path, data, settings, key))
    found_diagnostics, result.cached = _lint_all(tasks, cache, options.jobs)
    if options.fix_mode:
        found_diagnostics = _fix_all(tasks, found_diagnostics, options, result)
    result.diagnostics.extend(found_diagnostics)
    shape_diagnostics = _shape_diagnostics(tasks, cache, overrides)
    if options.fix_mode and options.unsafe_fixes:
        shape_diagnostics = _fix_shapes(tasks, shape_diagnostics, options, result)
    result.diagnostics.extend(shape_diagnostics)
    cache.save()
    result.diagnostics.sort(key=Diagnostic.sort_key)
    return result


def run_source(
    data: bytes, filename: str, overrides: Overrides, options: RunOptions | None = None
) -> RunResult:
    """Lint one buffer (standard input) as if it were the file `filename`.

    With `--fix`, `fixed_text` holds the fixed buffer; with `--diff`, its diff.
    """
    options = options or RunOptions()
    path = Path(filename)
    settings = settings_for(path, overrides)
    task = _Task(filename, None, data, settings, "")
    result = RunResult(files=[filename])
    diagnostics = _lint_one(task)
    if options.fix_mode:
        diagnostics = _fix_all([task], diagnostics, options, result)
    result.diagnostics = diagnostics + _shape_diagnostics([task], None, overrides)
    result.diagnostics.sort(key=Diagnostic.sort_key)
    return result


def _source_codes(task: _Task) -> set[str]:
    return {c for c in task.settings.enabled if not c.startswith(SHAPE_PREFIX)}


def _lint_one(task: _Task) -> list[Diagnostic]:
    return lint_input(
        task.display,
        task.data,
        _source_codes(task),
        torch_version=task.settings.config.torch_version,
    )


def _lint_task(task: _Task) -> tuple[_Task, list[Diagnostic]]:
    return task, _lint_one(task)


def _lint_all(
    tasks: list[_Task], cache: ResultCache, jobs: int | None
) -> tuple[list[Diagnostic], int]:
    """Diagnostics for every task, and how many came from the cache."""
    diagnostics: list[Diagnostic] = []
    misses: list[_Task] = []
    for task in tasks:
        cached = cache.get(task.display, task.key)
        if cached is None:
            misses.append(task)
        else:
            diagnostics.extend(cached)
    jobs = jobs or os.cpu_count() or 1
    if jobs > 1 and len(misses) >= _PARALLEL_THRESHOLD:
        context = multiprocessing.get_context("fork" if sys.platform == "linux" else None)
        chunk = max(1, len(misses) // (jobs * 8))
        with ProcessPoolExecutor(max_workers=jobs, mp_context=context) as pool:
            done = list(pool.map(_lint_task, misses, chunksize=chunk))
    else:
        done = [_lint_task(task) for task in misses]
    for task, found in done:
        cache.put(task.display, task.key, found)
        diagnostics.extend(found)
    return diagnostics, len(tasks) - len(misses)


def _shape_mode(tasks: list[_Task], overrides: Overrides) -> str:
    modes = {overrides.shapes or task.settings.config.shapes for task in tasks}
    return "on" if "on" in modes else "auto" if "auto" in modes else "off"


def _shape_diagnostics(
    tasks: list[_Task], cache: ResultCache | None, overrides: Overrides
) -> list[Diagnostic]:
    """TL6xx for the files whose settings enable them, from one worker run (or the cache)."""
    candidates = [
        t
        for t in tasks
        if (overrides.shapes or t.settings.config.shapes) != "off"
        and any(c.startswith(SHAPE_PREFIX) for c in t.settings.enabled)
        and b"Module" in t.data
    ]
    mode = _shape_mode(tasks, overrides) if tasks else "off"
    if mode == "off" or not candidates:
        return []
    try:
        from torchlint import shapes
    except ImportError:
        shapes = None
    if shapes is None or not shapes.torch_available():
        if mode == "on":
            raise TorchlintError(
                "shape checks are on (shapes = true / --shapes) but torch cannot be imported;"
                " install torch, or use --no-shapes"
            )
        return []
    # Scripts without a model of their own are evidence for the models they import: a
    # dataset or a literal test tensor used with them says what their input is.
    chosen = {id(t) for t in candidates}
    evidence = [t for t in tasks if id(t) not in chosen and b"torch" in t.data]
    torch_version = importlib.metadata.version("torch")
    run_digest = hashlib.sha256(
        b"".join(t.key.encode() + t.data for t in [*candidates, *evidence])
    ).hexdigest()
    keys = {
        t.display: cache_key(t.data, t.settings.enabled, torch_version, run_digest)
        for t in candidates
    }
    if cache is not None:
        hits = [cache.get("shapes:" + t.display, keys[t.display]) for t in candidates]
        if all(h is not None for h in hits):
            return [d for h in hits for d in h or []]
    sources: dict[str, str] = {}
    for task in [*candidates, *evidence]:
        text = python_source(task.display, task.data)
        if text is not None:
            sources[task.display] = text
    declared = {}
    for task in candidates:
        declared.update(dict(task.settings.config.declared_shapes))
    found = shapes.check_files(list(sources.items()), declared=declared)
    diagnostics: list[Diagnostic] = []
    for task in candidates:
        if task.display not in sources:
            continue
        kept = [d for d in found.get(task.display, []) if d.code in task.settings.enabled]
        kept = apply_suppressions(sources[task.display], kept)
        kept = map_diagnostics(task.display, task.data, kept)
        if cache is not None:
            cache.put("shapes:" + task.display, keys[task.display], kept)
        diagnostics.extend(kept)
    return diagnostics


def _fix_shapes(
    tasks: list[_Task], diagnostics: list[Diagnostic], options: RunOptions, result: RunResult
) -> list[Diagnostic]:
    """Write the unsafe fixes of shape findings (corrected layer sizes): one pass per file,
    on files the source fixes left as they were read."""
    by_display = {t.display: t for t in tasks}
    grouped: dict[str, list[Diagnostic]] = {}
    for diagnostic in diagnostics:
        grouped.setdefault(diagnostic.path, []).append(diagnostic)
    remaining: list[Diagnostic] = []
    for display, found in grouped.items():
        task = by_display.get(display)
        if task is None or task.path is None or not display.endswith(".py"):
            remaining.extend(found)
            continue
        try:
            original = task.data.decode("utf-8")
        except UnicodeDecodeError:
            remaining.extend(found)
            continue
        fixed, count = apply_edits(original, found, unsafe=True)
        if count == 0 or fixed == original:
            remaining.extend(found)
            continue
        if options.fix_mode == "diff":
            result.fixed_text.append(
                "".join(
                    difflib.unified_diff(
                        original.splitlines(keepends=True),
                        fixed.splitlines(keepends=True),
                        fromfile=display,
                        tofile=display,
                    )
                )
            )
        else:
            try:
                write_atomically(task.path, fixed.encode("utf-8"), task.data)
            except (FileChangedError, OSError) as exc:
                result.warnings.append(f"{display}: shape fixes not written: {exc}")
                remaining.extend(found)
                continue
        result.fixed += count
        remaining.extend(d for d in found if not applicable(d, True))
    return remaining


def _fix_all(
    tasks: list[_Task], diagnostics: list[Diagnostic], options: RunOptions, result: RunResult
) -> list[Diagnostic]:
    """Fix the files that have applicable fixes; returns the diagnostics left afterwards."""
    by_path: dict[str, list[Diagnostic]] = {}
    for diagnostic in diagnostics:
        by_path.setdefault(diagnostic.path, []).append(diagnostic)
    remaining: list[Diagnostic] = []
    for task in tasks:
        found = by_path.pop(task.display, [])
        if not any(applicable(d, options.unsafe_fixes) for d in found):
            remaining.extend(found)
            if task.path is None and options.fix_mode == "fix":
                result.fixed_text.append(task.data.decode("utf-8", errors="surrogateescape"))
            continue
        remaining.extend(_fix_one(task, options, result))
    for rest in by_path.values():
        remaining.extend(rest)
    return remaining


def _fix_one(task: _Task, options: RunOptions, result: RunResult) -> list[Diagnostic]:
    outcome = fix_input(
        task.display,
        task.data,
        _source_codes(task),
        unsafe=options.unsafe_fixes,
        torch_version=task.settings.config.torch_version,
    )
    result.warnings.extend(outcome.warnings)
    if outcome.data is None:
        return outcome.remaining
    if options.fix_mode == "diff":
        result.fixed_text.append(outcome.diff)
    elif task.path is None:
        result.fixed_text.append(outcome.data.decode("utf-8", errors="surrogateescape"))
    else:
        try:
            write_atomically(task.path, outcome.data, task.data)
        except (FileChangedError, OSError) as exc:
            result.warnings.append(f"{task.display}: fixes not written: {exc}")
            return _lint_one(task)
    result.fixed += outcome.fixed
    return outcome.remaining
