"""Shape checking (TL601-TL606, TL690): find layers whose sizes cannot fit together.

This package's top level does not import torch: `check_files` reads the linted files
statically, then hands the files that define nn.Module subclasses to one worker process
(`torchlint.shapes.worker`, the only module that imports torch), which builds each model
on the meta device and runs it on fake tensors.
"""

from __future__ import annotations

import ast
import importlib.util
import os
from collections.abc import Callable, Collection
from typing import TYPE_CHECKING, Any, NamedTuple

from torchlint.diagnostic import Diagnostic, Edit, Fix, Severity

if TYPE_CHECKING:
    from torchlint.shapes.client import WorkerProcess
    from torchlint.shapes.discover import FileInfo

__all__ = [
    "NO_SHAPES_ENV",
    "check_files",
    "needs_worker",
    "refused_by_environment",
    "torch_available",
    "worker_job",
]

_SKIPPED = "TL690"
#: Set to 1 (or true/yes) to turn shape checks off whatever a repository configures.
NO_SHAPES_ENV = "TORCHLINT_NO_SHAPES"
_DEFAULT_TIMEOUT = 20.0


def refused_by_environment() -> bool:
    """Whether the user turned shape checks (which run model constructors) off for good."""
    return os.environ.get(NO_SHAPES_ENV, "").strip().lower() in ("1", "true", "yes", "on")


def torch_available() -> bool:
    """Whether torch can be imported (without importing it)."""
    try:
        return importlib.util.find_spec("torch") is not None
    except (ImportError, ValueError):
        return False


def check_files(
    files: list[tuple[str, str]],
    *,
    declared: dict[str, dict] | None = None,
    timeout: float | None = None,
    tables: dict[str, list[dict[str, Any]]] | None = None,
    only: Collection[tuple[str, str]] | None = None,
    stats: dict[str, list[dict[str, Any]]] | None = None,
    started: WorkerProcess | None = None,
    checked: Collection[str] | None = None,
    progress: Callable[[int, int], None] | None = None,
    size_conditions: bool = True,
) -> dict[str, list[Diagnostic]]:
    """TL6xx diagnostics per path for the given (path, source) files of one run.

    All files serve as evidence (call sites, example inputs) and for project imports; only
    files that define nn.Module subclasses (or module-level `nn.Sequential`s) are checked.
    With `tables` (a dict to fill), the worker also describes each model it checked, layer
    by layer (`torchlint.shapes.table`), stored by path. With `only` ((path, name) pairs),
    just those classes and module-level models are checked; the other files are evidence.
    `timeout` is per file (default 20 s, or `TORCHLINT_SHAPES_TIMEOUT`).
    With `stats` (a dict to fill), how each model was checked (`fx` or the hooks `fallback`,
    its result, seconds) is stored by path, for benchmarks.
    `started`: a worker started earlier (`start_worker`, while the run did other work); it
    serves the check if a model is to be checked, and is stopped in any case.
    `checked`: the paths of the files to check (the others are evidence only); None: all.
    `progress` is called as the worker answers: files checked so far, files with models.
    `size_conditions`: whether the sizes a model is limited to are wanted (TL606, off by
    default). Without them, an image model that runs at its own common side (`img_size =
    224`) is clean without the search for the sizes it takes.
    """
    if timeout is None:
        try:
            timeout = float(os.environ.get("TORCHLINT_SHAPES_TIMEOUT") or _DEFAULT_TIMEOUT)
        except ValueError:
            timeout = _DEFAULT_TIMEOUT
    worker = started
    try:
        infos, twins, trees = _scan(files)
        moved = _moved_to_generated(twins, checked)
        if checked is not None:
            chosen = {(i.path, n) for i in infos if i.path in checked for n in _names(i)}
            only = chosen if only is None else {pair for pair in only if pair in chosen}
        if not infos:
            return moved
        if not torch_available():
            found = _check_models(
                infos, files, declared, timeout, tables, only, stats, None, False, trees=trees
            )
            return _merged(found, moved)
        if worker is None and _needs_worker(infos, tables is not None):
            # A model will be checked: the worker imports torch while evidence is collected.
            from torchlint.shapes.client import start_worker

            worker = start_worker()
        found = _check_models(
            infos,
            files,
            declared,
            timeout,
            tables,
            only,
            stats,
            worker,
            progress=progress,
            size_conditions=size_conditions,
            trees=trees,
        )
        return _merged(found, moved)
    finally:
        if worker is not None:
            worker.close()


#: A class of a modular template that a generated file defines too: (its file, its name,
#: its class, the generated file's name). Its results are the generated twin's.
_Twin = tuple["FileInfo", str, Any, str]


def _take_twins(infos: list[FileInfo]) -> list[_Twin]:
    """Take the classes of transformers' modular templates that a file generated from the
    template defines too (see `modular_templates`) out of `infos`."""
    from torchlint.shapes.modular_templates import generated_twins

    taken: list[_Twin] = []
    for info in infos:
        for name, twin in generated_twins(info.abspath, list(info.classes)).items():
            taken.append((info, name, info.classes.pop(name), twin))
    return taken


def _moved_to_generated(
    twins: list[_Twin], checked: Collection[str] | None
) -> dict[str, list[Diagnostic]]:
    """TL690 for the template classes `_take_twins` took out (those with a `forward`, of the
    files checked)."""
    from torchlint.shapes.modular_templates import template_reason

    moved: dict[str, list[Diagnostic]] = {}
    for info, name, cls, twin in twins:
        if (checked is not None and info.path not in checked) or not _has_forward(cls):
            continue
        item = {"code": _SKIPPED, "path": info.path, "line": cls.line, "col": 1}
        message = f"shape check of {name} skipped: {template_reason(twin)}"
        moved.setdefault(info.path, []).append(_diagnostic(item, message, {}))
    return moved


def _merged(
    found: dict[str, list[Diagnostic]], moved: dict[str, list[Diagnostic]]
) -> dict[str, list[Diagnostic]]:
    for path, diagnostics in moved.items():
        found.setdefault(path, []).extend(diagnostics)
        found[path].sort(key=Diagnostic.sort_key)
    return found


def _names(info: FileInfo) -> list[str]:
    return [*info.classes, *info.module_level]


def needs_worker(files: list[tuple[str, str]]) -> bool:
    """Whether `check_files` on these files will start a worker (a model may be checked),
    so that a caller can start it earlier (`client.start_worker`)."""
    if not torch_available():
        return False
    scan = _scan_files(files)
    _scanned[:] = [(files, scan)]
    return bool(scan.infos) and _needs_worker(scan.infos, False)


class _Scan(NamedTuple):
    """What `_scan_files` found: the files that define models, the classes of modular
    templates taken out of them (`_take_twins`), and the trees parsed on the way (by
    abspath), which the evidence reads instead of parsing those files again."""

    infos: list[FileInfo]
    twins: list[_Twin]
    trees: dict[str, ast.Module]


#: The scan `needs_worker` made, for the `check_files` of the same files that follows it.
_scanned: list[tuple[list[tuple[str, str]], _Scan]] = []


def _scan(files: list[tuple[str, str]]) -> _Scan:
    """`_scan_files(files)`, taken over from `needs_worker` when it scanned the same files
    (the same list of infos, so that the evidence collected for it is taken over too)."""
    if _scanned:
        scanned, scan = _scanned.pop()
        if scanned == files:
            return scan
    return _scan_files(files)


def _scan_files(files: list[tuple[str, str]]) -> _Scan:
    """The files that define models (`discover.scan`), less the classes of modular templates
    that generated files define too."""
    from torchlint.shapes import discover

    trees: dict[str, ast.Module] = {}
    infos = discover.scan(files, trees)
    twins = _take_twins(infos)
    return _Scan([info for info in infos if info.classes or info.module_level], twins, trees)


def prepare_evidence(files: list[tuple[str, str]], declared: dict[str, dict] | None) -> None:
    """Collect the evidence (call sites, example inputs) of the files `needs_worker` just
    scanned, for the `check_files` of the same files and `declared` that follows: a run does
    it while its source rules still run, not while the worker waits for its request."""
    from torchlint.shapes import evidence

    _collected.clear()
    if not _scanned or _scanned[0][0] is not files:
        return
    infos, _, trees = _scanned[0][1]
    try:
        facts = evidence.collect(infos, files, declared, trees)
    except Exception:  # collected again by `check_files`, which reports what goes wrong
        return
    finally:
        trees.clear()  # read once: not kept through the shape stage
    _collected.append((infos, files, declared, facts))


#: The evidence `prepare_evidence` collected: (infos, files, declared, facts).
_collected: list[tuple[list[FileInfo], list[tuple[str, str]], Any, dict]] = []


def _collect(
    infos: list[FileInfo],
    files: list[tuple[str, str]],
    declared: dict[str, dict] | None,
    trees: dict[str, ast.Module] | None = None,
) -> dict[tuple[str, str], dict[str, Any]]:
    """`evidence.collect`, taken over from `prepare_evidence` when it collected the same
    (`trees`: those the scan parsed, emptied once read)."""
    from torchlint.shapes import evidence

    if _collected:
        known, collected_files, collected_declared, facts = _collected.pop()
        if known is infos and collected_declared == declared and collected_files == files:
            return facts
    try:
        return evidence.collect(infos, files, declared, trees)
    finally:
        if trees:
            trees.clear()


def _needs_worker(infos: list[FileInfo], tables: bool) -> bool:
    from torchlint.shapes.settle import may_settle

    return tables or not all(may_settle(info) for info in infos)


def worker_job(info: FileInfo, facts: dict[tuple[str, str], dict[str, Any]]) -> dict[str, Any]:
    """The worker's job for one file that defines models: its classes, each with its line and
    what `evidence.collect` found for it (`facts`), and its module-level models."""
    from torchlint.shapes import evidence

    return {
        "abspath": info.abspath,
        "module": info.module,
        "classes": {
            name: {**facts[(info.abspath, name)], "line": cls.line}
            for name, cls in info.classes.items()
        },
        "module_level": info.module_level,
        "module_level_spec": facts.get((info.abspath, evidence.MODULE_LEVEL)),
        # Each module-level model's own evidence (`model_0(image)`), where it has some.
        "module_level_specs": {
            name: spec
            for name in info.module_level
            if (spec := facts.get((info.abspath, f"{evidence.MODULE_LEVEL}:{name}")))
        },
    }


def _check_models(
    infos: list[FileInfo],
    files: list[tuple[str, str]],
    declared: dict[str, dict] | None,
    timeout: float,
    tables: dict[str, list[dict[str, Any]]] | None,
    only: Collection[tuple[str, str]] | None,
    stats: dict[str, list[dict[str, Any]]] | None,
    worker: WorkerProcess | None,
    torch: bool = True,
    progress: Callable[[int, int], None] | None = None,
    size_conditions: bool = True,
    trees: dict[str, ast.Module] | None = None,
) -> dict[str, list[Diagnostic]]:
    """`check_files` once the files that define models are known (`worker`: started early,
    or None; `trees`: the files the scan parsed)."""
    facts = _collect(infos, files, declared, trees)
    # Every file's root, checked or evidence: its imports resolve as in a run that checks all.
    roots = sorted({info.root for info in infos} | {os.getcwd()})
    if only is not None:
        # After collecting evidence: a class of the same name elsewhere keeps its own.
        for info in infos:
            info.classes = {n: c for n, c in info.classes.items() if (info.path, n) in only}
            info.module_level = [n for n in info.module_level if (info.path, n) in only]
        infos = [i for i in infos if i.classes or i.module_level]
        if not infos:
            return {}
    display = {os.path.abspath(path): path for path, _ in files}
    jobs = [
        {
            **worker_job(info, facts),
            **({"table": True} if tables is not None else {}),
            **({} if size_conditions else {"size_conditions": False}),
        }
        for info in infos
    ]
    if not torch:
        return {
            info.path: [
                _diagnostic(
                    {"code": _SKIPPED, "path": info.abspath, "line": 1, "col": 1},
                    "shape check skipped: torch is not installed",
                    display,
                )
            ]
            for info in infos
        }
    from torchlint.shapes.client import run_worker
    from torchlint.shapes.discover import SOURCE_SUFFIXES

    request = {
        "jobs": jobs,
        "texts": {
            os.path.abspath(path): text for path, text in files if path.endswith(SOURCE_SUFFIXES)
        },
        "roots": roots,
        "timeout": timeout,
    }
    from torchlint.shapes.loader import environment_paths
    from torchlint.shapes.settle import settled

    known = None if tables is not None else settled(infos, facts, environment_paths())
    if known is not None:  # no model can be checked: the worker would only say why
        results, worker_facts = known, {}
    else:
        results, worker_facts = run_worker(request, timeout, worker, progress)
    _settle_pending(results)
    out: dict[str, list[Diagnostic]] = {}
    seen: set[tuple[str, int, str]] = set()
    for info in infos:
        result = results.get(info.abspath)
        if result is None:
            found = _unchecked(info, worker_facts.get("error", "the shape worker gave no answer"))
        elif "error" in result:
            found = _unchecked(info, result["error"])
        else:
            found = result.get("findings", [])
            if stats is not None:
                stats[info.path] = result.get("models", [])
            if tables is not None:
                tables[info.path] = result.get("tables", [])
        for item in found:
            if "error" in item:
                message = f"shape check skipped: {item['error']}"
            else:
                message = item["message"]
            diagnostic = _diagnostic(item, message, display)
            key = (diagnostic.path, diagnostic.line, diagnostic.code)
            if key in seen:
                continue
            seen.add(key)
            out.setdefault(diagnostic.path, []).append(diagnostic)
    if stats is not None:
        _record_covered(results, infos, stats)
    for diagnostics in out.values():
        diagnostics.sort(key=Diagnostic.sort_key)
    return out


#: What a model's TL690 says when its file's check ended early.
UNFINISHED = "the file's check did not finish"


def _unchecked(info: FileInfo, reason: str) -> list[dict[str, Any]]:
    """TL690 for a file whose check ended early (a time-out, a crash): one per model class
    with a forward, at its line, so that none goes unnamed; else one for the file."""
    found = [
        {
            "code": _SKIPPED,
            "path": info.abspath,
            "line": cls.line,
            "col": 1,
            "message": f"shape check of {name} skipped: {UNFINISHED} ({reason})",
        }
        for name, cls in info.classes.items()
        if _has_forward(cls)
    ]
    return found or [{"code": _SKIPPED, "path": info.abspath, "line": 1, "col": 1, "error": reason}]


def _has_forward(cls: Any) -> bool:
    return any(
        isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)) and item.name == "forward"
        for item in cls.node.body
    )


def _record_covered(
    results: dict[str, dict[str, Any]], infos: list[Any], stats: dict[str, list[dict[str, Any]]]
) -> None:
    """For benchmarks: a class checked only inside another model gets a `covered` record."""
    covered: set[str] = set()
    for result in results.values():
        covered.update(result.get("covered", ()))
    for info in infos:
        records = stats.setdefault(info.path, [])
        alone = {r.get("model") for r in records if r.get("result") in ("ok", "finding")}
        for name in info.classes:
            if name not in alone and f"{info.abspath}::{name}" in covered:
                records.append({"model": name, "path": "covered", "result": "covered"})


def _settle_pending(results: dict[str, dict[str, Any]]) -> None:
    """TL690 for the classes no checked model built, in any file of the run.

    A file's worker leaves aside the classes it could not build on their own (a block that
    needs arguments); a model of another file may have built, and so checked, them.
    """
    covered: set[str] = set()
    cut_short: dict[str, str] = {}
    for result in results.values():
        covered.update(result.get("covered", ()))
        cut_short.update(result.get("cut_short", {}))
    for result in results.values():
        if "findings" in result:
            result["findings"] = [
                f for f in result["findings"] if f.get("unless_covered") not in covered
            ]
    for path, result in results.items():
        for item in result.get("pending", ()):
            if f"{path}::{item['name']}" in covered:
                continue
            reason = cut_short.get(f"{path}::{item['name']}", item["reason"])
            message = f"shape check of {item['name']} skipped: {reason}"
            result.setdefault("findings", []).append(
                {
                    "code": _SKIPPED,
                    "path": path,
                    "line": item["line"],
                    "col": 1,
                    "end_line": item["line"],
                    "end_col": 1,
                    "message": message,
                }
            )


def _diagnostic(item: dict[str, Any], message: str, display: dict[str, str]) -> Diagnostic:
    from torchlint.rule_codes import rule_label

    # Not the rules themselves: a run whose rules ran in worker processes has not imported
    # them (nor LibCST) here, and would only for these two facts.
    name, severity = rule_label(item["code"]) or ("shape-check", Severity.ERROR)
    line, col = int(item.get("line", 1)), int(item.get("col", 1))
    return Diagnostic(
        path=display.get(item["path"], item["path"]),
        line=line,
        column=col,
        end_line=int(item.get("end_line", line)),
        end_column=int(item.get("end_col", col)),
        code=item["code"],
        name=name,
        message=message,
        severity=severity,
        fix=_fix(item),
    )


def _fix(item: dict[str, Any]) -> Fix | None:
    """The unsafe fix a finding offers (a corrected layer size), if its edits are in its file."""
    fix = item.get("fix")
    if not fix or any(edit["path"] != item["path"] for edit in fix["edits"]):
        return None
    edits = tuple(
        Edit(e["line"], e["col"], e["end_line"], e["end_col"], e["content"]) for e in fix["edits"]
    )
    return Fix(fix["message"], edits, safe=False)
