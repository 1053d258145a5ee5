"""A whole run: discover files, serve unchanged ones from the cache, lint the rest in parallel.

Shape checks (TL6xx) run after the source rules, in one separate worker process, only when
torch is importable and they are enabled.
"""

from __future__ import annotations

import functools
import hashlib
import os
import sys
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from torchlint.cache import CACHE_DIR_NAME, ResultCache, cache_key
from torchlint.config import FileSettings, Overrides, settings_for
from torchlint.diagnostic import Diagnostic
from torchlint.discovery import discover
from torchlint.errors import TorchlintError
from torchlint.fixing import FileChangedError, applicable, apply_edits, write_atomically
from torchlint.inputs import (
    fix_input,
    lint_input,
    map_diagnostics,
    may_hold_model,
    python_source,
)
from torchlint.noqa import apply_suppressions
from torchlint.semantic.resolve import Stamps, dependency_digest
from torchlint.torch_version import target_torch_version

if TYPE_CHECKING:
    from torchlint.shape_keys import ShapeKeys
    from torchlint.shapes.client import WorkerProcess

SHAPE_PREFIX = "TL6"
#: Where the shape checks' absence is explained, once per run.
NO_TORCH_NOTE = (
    "shape checks (TL601-TL606) skipped for {count}: torch is not installed; install it"
    " (CPU build: pip install torch --index-url https://download.pytorch.org/whl/cpu),"
    " or pass --no-shapes to skip them without this note"
)
SKIPPED = "TL690"
_SHAPES = "shapes:"
# Below this many files to lint, starting worker processes costs more than it saves.
_PARALLEL_THRESHOLD = 16
# Most files a worker takes at once.
_MAX_CHUNK = 16


@dataclass(frozen=True)
class RunOptions:
    jobs: int | None = None
    use_cache: bool = True
    force_exclude: bool = False
    cache_dir: Path | None = None
    #: None to only report, "fix" to write fixes, "diff" to show them without writing.
    fix_mode: str | None = None
    unsafe_fixes: bool = False
    #: Called as the run advances: (stage, done, total), stage "files" or "shapes".
    progress: Callable[[str, int, int], None] | None = None


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
    #: Checks that did not run at all, each with its reason ("shape checks: ...").
    not_run: list[str] = field(default_factory=list)
    #: What fixes resolved, by (path, code, rule name).
    fixed_codes: Counter[tuple[str, str, str]] = field(default_factory=Counter)


@dataclass(frozen=True)
class _Task:
    display: str
    path: Path | None
    #: The file's bytes; None when its key was found by its stamps (read when needed).
    raw: bytes | None
    settings: FileSettings
    key: str
    #: Where imported project files' summaries are cached; None for memory only.
    summary_dir: Path | None = None
    #: What `key` was computed from, for the cache to find it by later (None: found so).
    stamps: Stamps | None = None

    @functools.cached_property
    def data(self) -> bytes:
        """The file's bytes: a warm run serves most files from the cache without them."""
        if self.raw is not None or self.path is None:
            return self.raw or b""
        try:
            return self.path.read_bytes()
        except OSError:  # gone since it was found: its cached findings stand
            return b""


def display_path(path: Path) -> str:
    """The path as users see it: relative to the working directory when under it."""
    if os.name == "posix":  # the same answer by string prefix: no exception per outside path
        if not path.is_absolute():
            return path.as_posix()
        cwd = os.getcwd()
        text = str(path)
        prefix = cwd if cwd.endswith("/") else cwd + "/"
        if text.startswith(prefix):
            return Path(text[len(prefix) :]).as_posix()
        return "." if text == cwd else text
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
            info = path.stat()
            size = info.st_size
            if size > limit:
                result.warnings.append(
                    f"{display}: skipped, {size / 1e6:.1f} MB is over max-file-size-kb"
                    f" ({settings.config.max_file_size_kb})"
                )
                continue
            key = cache.known_key(display, _settings_key(settings)) if cache.enabled else ""
            data = None if key else path.read_bytes()
        except OSError as exc:
            from torchlint.engine import SYNTAX_ERROR, file_error

            if SYNTAX_ERROR in settings.enabled:
                reason = exc.strerror or type(exc).__name__
                result.diagnostics.append(file_error(display, f"cannot read file: {reason}"))
            continue
        stamps = None
        if key is None and data is not None:
            stamps = {os.path.abspath(path): [info.st_mtime_ns, info.st_size]}
            key = cache_key(
                data,
                settings.enabled,
                _torch_version(settings) or "",
                dependency_digest(path, data, stamps),  # findings may come from imported files
            )
        summary_dir = cache.directory if options.use_cache else None
        tasks.append(_Task(display, path, data, settings, key, summary_dir, stamps))
    early: list[WorkerProcess] = []  # a shape worker importing torch while the rules run
    try:
        found_diagnostics, result.cached = _lint_all(
            tasks,
            cache,
            options.jobs,
            options.progress,
            busy=lambda misses: early.extend(_early_worker(tasks, misses, cache, overrides)),
        )
        if options.fix_mode:
            found_diagnostics = _fix_all(tasks, found_diagnostics, options, result)
        result.diagnostics.extend(found_diagnostics)
        shape_found, unchecked = _shape_diagnostics(
            tasks, cache, overrides, result, options.progress, next(iter(early), None)
        )
    finally:
        for worker in early:
            worker.close()
    if options.fix_mode and options.unsafe_fixes:
        shape_found = _fix_shapes(tasks, shape_found, options, result)
    result.diagnostics.extend(shape_found)
    _note_unchecked(result, unchecked)
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
    shape_found, unchecked = _shape_diagnostics([task], None, overrides, result)
    result.diagnostics = diagnostics + shape_found
    _note_unchecked(result, unchecked)
    result.diagnostics.sort(key=Diagnostic.sort_key)
    return result


class Unchecked(NamedTuple):
    """What the shape checks left undone: files whose check did not finish (a time-out, a
    crash, an import that failed) and models skipped with a reason (TL690)."""

    files: int = 0
    models: int = 0


def _note_unchecked(result: RunResult, unchecked: Unchecked) -> None:
    """Never a bare "All checks passed!" when some shape check did not happen: with TL690
    not shown, one line on standard error says how many and how to see why."""
    if not (unchecked.files or unchecked.models):
        return
    if any(d.code == SKIPPED for d in result.diagnostics):
        return
    parts = []
    if unchecked.files:
        files = unchecked.files
        parts.append(f"shape checks did not finish for {files} file{'s' if files != 1 else ''}")
    if unchecked.models:
        models = unchecked.models
        parts.append(f"{models} model{'s' if models != 1 else ''} not shape-checked")
    result.warnings.append(f"{'; '.join(parts)}; see --extend-select {SKIPPED}")


def _source_codes(task: _Task) -> set[str]:
    return {c for c in task.settings.enabled if not c.startswith(SHAPE_PREFIX)}


def _torch_version(settings: FileSettings) -> str | None:
    return target_torch_version(settings.config.torch_version)


def _settings_key(settings: FileSettings) -> str:
    """What a file's cache key covers besides its content and imports."""
    return cache_key(b"", settings.enabled, _torch_version(settings) or "")


def _lint_one(task: _Task) -> list[Diagnostic]:
    from torchlint.semantic.project import ProjectIndex  # LibCST: only to lint

    return lint_input(
        task.display,
        task.data,
        _source_codes(task),
        torch_version=_torch_version(task.settings),
        project_index=ProjectIndex(task.summary_dir),
    )


def _lint_task(task: _Task) -> tuple[_Task, list[Diagnostic]]:
    return task, _lint_one(task)


def _lint_tasks(tasks: list[_Task]) -> list[tuple[_Task, list[Diagnostic]]]:
    return [_lint_task(task) for task in tasks]


def _lint_all(
    tasks: list[_Task],
    cache: ResultCache,
    jobs: int | None,
    progress: Callable[[str, int, int], None] | None = None,
    busy: Callable[[list[_Task]], None] | None = None,
) -> tuple[list[Diagnostic], int]:
    """Diagnostics for every task, and how many came from the cache.

    `busy` is called with the tasks to lint once the work is under way (worker processes
    forked), for the run to start what can overlap with it.
    """
    diagnostics: list[Diagnostic] = []
    misses: list[_Task] = []
    for task in tasks:
        cached = cache.get(task.display, task.key)
        if cached is None:
            misses.append(task)
        else:
            diagnostics.extend(cached)
            if task.stamps is not None:  # found by content: found by stamps next time
                _store(cache, task, cached)
    jobs = jobs or os.cpu_count() or 1
    done: list[tuple[_Task, list[Diagnostic]]] = []
    hits = len(tasks) - len(misses)

    def advance(item: tuple[_Task, list[Diagnostic]]) -> None:
        done.append(item)
        if progress is not None:
            progress("files", hits + len(done), len(tasks))

    if jobs > 1 and len(misses) >= _PARALLEL_THRESHOLD:
        # Only a cold run needs worker processes: a warm one does not import them.
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor, as_completed

        context = multiprocessing.get_context("fork" if sys.platform == "linux" else None)
        # Small chunks, taken as they finish: progress (and the first result) come early.
        size = max(1, min(len(misses) // (jobs * 8), _MAX_CHUNK))
        chunks = [misses[i : i + size] for i in range(0, len(misses), size)]
        with ProcessPoolExecutor(max_workers=jobs, mp_context=context) as pool:
            futures = [pool.submit(_lint_tasks, c) for c in chunks]
            if busy is not None:
                busy(misses)
            for future in as_completed(futures):
                for item in future.result():
                    advance(item)
    else:
        if busy is not None:
            busy(misses)
        for task in misses:
            advance(_lint_task(task))
    for task, found in done:
        _store(cache, task, found)
        diagnostics.extend(found)
    return diagnostics, len(tasks) - len(misses)


def _store(cache: ResultCache, task: _Task, found: list[Diagnostic]) -> None:
    cache.put(
        task.display, task.key, found, stamps=task.stamps, settings=_settings_key(task.settings)
    )


def _shape_mode(tasks: list[_Task], overrides: Overrides) -> str:
    modes = {overrides.shapes or task.settings.config.shapes for task in tasks}
    return "on" if "on" in modes else "auto" if "auto" in modes else "off"


def _shape_diagnostics(
    tasks: list[_Task],
    cache: ResultCache | None,
    overrides: Overrides,
    result: RunResult,
    progress: Callable[[str, int, int], None] | None = None,
    started: WorkerProcess | None = None,
) -> tuple[list[Diagnostic], Unchecked]:
    """TL6xx for the files whose settings enable them, from one worker run (or the cache),
    and what was left unchecked (for a note when TL690 is not shown).

    Without torch, one warning says the checks were skipped and how to get them. `started`:
    a worker started early (`_early_worker`), used if a model is checked.
    """
    mode = _shape_mode(tasks, overrides) if tasks else "off"
    if mode == "off":
        return [], Unchecked()
    try:
        from torchlint import shapes
    except ImportError:
        shapes = None
    if shapes is None or not shapes.torch_available():
        candidates = _shape_candidates(tasks, overrides)
        if not candidates:
            return [], Unchecked()
        if mode == "on":
            raise TorchlintError(
                "shape checks are on (shapes = true / --shapes) but torch cannot be imported;"
                " install torch, or use --no-shapes"
            )
        files = f"{len(candidates)} file{'s' if len(candidates) != 1 else ''} with models"
        result.warnings.append(NO_TORCH_NOTE.format(count=files))
        result.not_run.append("shape checks: torch is not installed")
        return [], Unchecked()
    cached = cache is not None and cache.enabled
    fingerprint = _shape_fingerprint(tasks, overrides) if cached else ""
    if cache is not None and cached:
        served = _shape_run_from_cache(tasks, cache, fingerprint, result)
        if served is not None:
            return served
    candidates = _shape_candidates(tasks, overrides)
    if not candidates:
        return [], Unchecked()
    evidence = _shape_evidence(tasks, candidates)
    sources = _shape_sources([*candidates, *evidence])
    keys = _shape_keys(candidates, evidence, sources) if cached else None
    per_file: dict[str, list[Diagnostic] | None] = {}
    if cache is not None and keys is not None:
        for task in candidates:
            per_file[task.display] = cache.get(
                task.display, keys.keys[task.display], section=_SHAPES
            )
        _note_cached_timeouts(result, per_file, cache.shape_run(fingerprint))
    missing = [t for t in candidates if per_file.get(t.display) is None]
    if missing:
        # Only the groups of files that changed are checked again; every file is evidence.
        checked = set().union(*(keys.groups[t.display] for t in missing)) if keys else None
        declared = _declared_shapes(candidates)
        if progress is not None:
            progress("shapes", 0, len(sources))
        found = shapes.check_files(
            list(sources.items()),
            declared=declared,
            started=started,
            checked=checked,
            progress=(lambda done, total: progress("shapes", done, total)) if progress else None,
            size_conditions=any(_SIZE_CONDITION in t.settings.enabled for t in candidates),
        )
        for task in candidates:
            if checked is not None and task.display not in checked:
                continue
            kept: list[Diagnostic] = []
            if task.display in sources:
                kept = apply_suppressions(sources[task.display], found.get(task.display, []))
                kept = map_diagnostics(task.display, task.data, kept)
            if cache is not None and keys is not None and not _incomplete(kept):
                cache.put(task.display, keys.keys[task.display], kept, section=_SHAPES)
            per_file[task.display] = kept
    complete = all(d is not None and not _incomplete(d) for d in per_file.values())
    if cache is not None and keys is not None and complete:
        cache.put_shape_run(fingerprint, keys.keys, keys.stamps)
    return _shape_report(candidates, per_file)


def _shape_run_from_cache(
    tasks: list[_Task], cache: ResultCache, fingerprint: str, result: RunResult
) -> tuple[list[Diagnostic], Unchecked] | None:
    """The shape results of a run whose files, settings and imports are as when they were
    stored: found by stamps, no file read. None when any of them changed."""
    record = cache.shape_run(fingerprint)
    if record is None:
        return None
    by_display = {t.display: t for t in tasks}
    per_file: dict[str, list[Diagnostic] | None] = {}
    for display, key in record["keys"].items():
        task = by_display.get(display)
        found = cache.get(display, key, section=_SHAPES) if task is not None else None
        if found is None:
            return None
        per_file[display] = found
    _note_cached_timeouts(result, per_file, record)
    return _shape_report([by_display[d] for d in per_file], per_file)


def _note_cached_timeouts(
    result: RunResult, per_file: dict[str, list[Diagnostic] | None], record: dict | None
) -> None:
    """A time-out kept in the cache is not retried: say so, and how to retry it."""
    count = sum(any(_timed_out(d) for d in found or ()) for found in per_file.values())
    if not count:
        return
    load = record.get("load") if record else None
    then = ""
    if isinstance(load, (int, float)) and load > 0:
        then = f" (load average {load:.1f} on {os.cpu_count()} cores then)"
    result.warnings.append(
        f"shape checks of {count} file{'s' if count != 1 else ''} timed out in an earlier"
        f" run{then} and are not retried: --no-cache, or a larger TORCHLINT_SHAPES_TIMEOUT,"
        " checks them again"
    )


#: The rule that tells the input sizes a model is limited to (off by default).
_SIZE_CONDITION = "TL606"


def _shape_candidates(tasks: list[_Task], overrides: Overrides) -> list[_Task]:
    """The tasks whose shape checks are on and that may define a model."""
    return [
        t
        for t in tasks
        if (overrides.shapes or t.settings.config.shapes) != "off"
        and any(c.startswith(SHAPE_PREFIX) for c in t.settings.enabled)
        and may_hold_model(t.data)
    ]


def _shape_evidence(tasks: list[_Task], candidates: list[_Task]) -> list[_Task]:
    """Scripts without a model of their own are evidence for the models they import: a
    dataset or a literal test tensor used with them says what their input is."""
    chosen = {id(t) for t in candidates}
    return [t for t in tasks if id(t) not in chosen and b"torch" in t.data]


def _shape_sources(tasks: list[_Task]) -> dict[str, str]:
    sources: dict[str, str] = {}
    for task in tasks:
        text = python_source(task.display, task.data)
        if text is not None:
            sources[task.display] = text
    return sources


def _early_worker(
    tasks: list[_Task], misses: list[_Task], cache: ResultCache, overrides: Overrides
) -> list[WorkerProcess]:
    """A shape worker started while the source rules run (its torch import overlaps them),
    when the shape stage will check a model; none when its results will likely come from the
    cache (no file it reads changed)."""
    if (cache.enabled and not misses) or _shape_mode(tasks, overrides) == "off":
        return []  # not one file read: a warm run
    candidates = _shape_candidates(tasks, overrides)
    if not candidates:
        return []
    evidence = _shape_evidence(tasks, candidates)
    changed = {id(t) for t in misses}
    if cache.enabled and not any(id(t) in changed for t in [*candidates, *evidence]):
        return []
    try:
        from torchlint import shapes
        from torchlint.shapes.client import start_worker
    except ImportError:
        return []
    sources = _shape_sources([*candidates, *evidence])
    files = list(sources.items())
    if not shapes.needs_worker(files):
        return []
    worker = start_worker(warm=True)
    try:  # while torch loads there and the rules run: the shape stage takes it over
        shapes.prepare_evidence(files, _declared_shapes(candidates))
    except BaseException:
        worker.close()
        raise
    return [worker]


def _declared_shapes(candidates: list[_Task]) -> dict[str, dict]:
    """The input shapes the candidates' settings declare, by class."""
    declared: dict[str, dict] = {}
    for task in candidates:
        declared.update(dict(task.settings.config.declared_shapes))
    return declared


def _shape_report(
    candidates: list[_Task], per_file: dict[str, list[Diagnostic] | None]
) -> tuple[list[Diagnostic], Unchecked]:
    """The enabled shape diagnostics, and what was left unchecked (see `Unchecked`)."""
    diagnostics: list[Diagnostic] = []
    files = models = 0
    for task in candidates:
        found = per_file.get(task.display) or []
        unfinished = any(_unfinished(d) for d in found)
        files += unfinished
        if not unfinished:
            models += sum(d.code == SKIPPED for d in found)
        diagnostics.extend(d for d in found if d.code in task.settings.enabled)
    return diagnostics, Unchecked(files, models)


def _unfinished(diagnostic: Diagnostic) -> bool:
    """A check stopped by the sandbox, a limit, a crash or a file that cannot be imported (not
    a model that needs arguments)."""
    message = diagnostic.message
    return diagnostic.code == SKIPPED and (
        message.startswith(("shape check skipped:", "could not import the file:"))
        or "Blocked:" in message
        or "the file's check did not finish" in message  # shapes.UNFINISHED, per model
    )


def _shape_fingerprint(tasks: list[_Task], overrides: Overrides) -> str:
    """What a run's shape results depend on, read without reading a file: every file's key
    (its content, imports and codes), its shape settings, the environment and torch."""
    from torchlint.torch_version import installed_torch_version

    digest = hashlib.sha256(f"{overrides.shapes}\0{os.getcwd()}\0".encode())
    digest.update(f"{installed_torch_version()}\0".encode())
    for name in _SHAPE_ENVIRONMENT:
        digest.update(f"{name}={os.environ.get(name, '')}\0".encode())
    for task in tasks:
        config = task.settings.config
        digest.update(f"{task.display}\0{task.key}\0{config.shapes}\0".encode())
        digest.update(repr(config.declared_shapes).encode() + b"\0")
    return digest.hexdigest()


#: Settings of the shape checks read from the environment.
_SHAPE_ENVIRONMENT = ("TORCHLINT_SHAPES_TIMEOUT", "TORCHLINT_SHAPES_MEMORY_MB")


def _shape_keys(
    candidates: list[_Task], evidence: list[_Task], sources: dict[str, str]
) -> ShapeKeys | None:
    """Cache keys for the candidates' shape results (`torchlint.shape_keys`); None when
    they cannot be trusted.

    Beside the files of its group, each key covers the run's shape configuration, the
    environment's limits, torchlint's version (in `cache_key`) and torch's.
    """
    from torchlint.shape_keys import shape_keys
    from torchlint.torch_version import installed_torch_version

    common = hashlib.sha256(f"{installed_torch_version()}\0{os.getcwd()}\0".encode())
    for name in _SHAPE_ENVIRONMENT:
        common.update(f"{name}={os.environ.get(name, '')}\0".encode())
    for task in candidates:
        common.update(repr(task.settings.config.declared_shapes).encode() + b"\0")
    settings = {
        t.display: cache_key(b"", t.settings.enabled, t.settings.config.shapes, common.hexdigest())
        for t in candidates
    }
    contents = {t.display: t.data for t in [*candidates, *evidence]}
    return shape_keys(contents, sources, settings, common.hexdigest())


def _timed_out(diagnostic: Diagnostic) -> bool:
    return diagnostic.code == SKIPPED and "timed out" in diagnostic.message


def _incomplete(diagnostics: list[Diagnostic]) -> bool:
    """A result the shape worker did not give (it did not start, or stopped) is not kept.

    A time-out is: under load it may be spurious, but checking again on every run would
    cost each warm run the whole time limit; the run that serves it says so.
    """
    return any(d.code == SKIPPED and "shape worker" in d.message for d in diagnostics)


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
            import difflib

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
        remaining.extend(_fix_one(task, found, options, result))
    for rest in by_path.values():
        remaining.extend(rest)
    return remaining


def _fix_one(
    task: _Task, found: list[Diagnostic], options: RunOptions, result: RunResult
) -> list[Diagnostic]:
    outcome = fix_input(
        task.display,
        task.data,
        _source_codes(task),
        unsafe=options.unsafe_fixes,
        torch_version=_torch_version(task.settings),
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
    left = Counter(d.code for d in outcome.remaining)
    for d in found:
        if left[d.code]:
            left[d.code] -= 1
        else:
            result.fixed_codes[(task.display, d.code, d.name)] += 1
    return outcome.remaining
