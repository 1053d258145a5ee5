"""One linted input, whatever its kind: a Python file or a Jupyter notebook.

`lint_input` gives the diagnostics, `fix_input` the fixed bytes (and a diff) for either kind, so
the runner and the language server never branch on the file type themselves.
"""

from __future__ import annotations

import difflib
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from torchlint.diagnostic import Diagnostic
from torchlint.fixing import MAX_PASSES, apply_edits, detect_encoding, encode, fix_source, parses
from torchlint.notebook import (
    NOTEBOOK_SUFFIX,
    Notebook,
    NotebookError,
    read_notebook,
    to_cell_diagnostic,
    with_cell_sources,
)
from torchlint.source import UndecodableSource, decode

if TYPE_CHECKING:
    from torchlint.semantic.project import ProjectIndex


def is_notebook(path: str) -> bool:
    return path.endswith(NOTEBOOK_SUFFIX)


@dataclass
class FixedInput:
    """The outcome of fixing one input: new bytes (None if unchanged), a diff, what is left."""

    data: bytes | None
    fixed: int
    remaining: list[Diagnostic]
    diff: str = ""
    warnings: list[str] = field(default_factory=list)


def lint_input(
    path: str,
    data: bytes,
    enabled: Collection[str],
    *,
    torch_version: str | None = None,
    project_index: ProjectIndex | None = None,
) -> list[Diagnostic]:
    from torchlint.engine import lint_bytes  # the rules, and LibCST: only to lint

    if not is_notebook(path):
        return lint_bytes(
            data, path, enabled, torch_version=torch_version, project_index=project_index
        )
    notebook = _load_notebook(path, data, enabled)
    if isinstance(notebook, list):
        return notebook
    return _lint_notebook(notebook, path, enabled, torch_version)


def may_hold_model(text: str | bytes) -> bool:
    """Whether an input's text may define a model the shape checks build: a module class, or
    a model built at the top (`model = nn.Sequential(...)`). A cheap test on the text."""
    if isinstance(text, bytes):
        return b"Module" in text or b"Sequential(" in text
    return "Module" in text or "Sequential(" in text


def python_source(path: str, data: bytes) -> str | None:
    """The Python text of an input (a notebook's joined cells), or None if unreadable."""
    try:
        text = decode(data)
        return read_notebook(text).source if is_notebook(path) else text
    except (UndecodableSource, NotebookError):
        return None


def map_diagnostics(path: str, data: bytes, diagnostics: list[Diagnostic]) -> list[Diagnostic]:
    """Re-address diagnostics of `python_source(path, data)` to notebook cells, if any."""
    if not is_notebook(path) or not diagnostics:
        return diagnostics
    notebook = read_notebook(decode(data))
    return [to_cell_diagnostic(notebook, d) for d in diagnostics]


def _load_notebook(path: str, data: bytes, enabled: Collection[str]) -> Notebook | list:
    from torchlint.engine import SYNTAX_ERROR, file_error

    try:
        return read_notebook(decode(data))
    except (UndecodableSource, NotebookError) as exc:
        return [file_error(path, f"cannot read notebook: {exc}")] if SYNTAX_ERROR in enabled else []


def _lint_notebook(
    notebook: Notebook, path: str, enabled: Collection[str], torch_version: str | None
) -> list[Diagnostic]:
    from torchlint.engine import lint_source

    found = lint_source(notebook.source, path, enabled, torch_version=torch_version)
    return [to_cell_diagnostic(notebook, d) for d in found]


def fix_input(
    path: str,
    data: bytes,
    enabled: Collection[str],
    *,
    unsafe: bool,
    torch_version: str | None = None,
) -> FixedInput:
    from torchlint.engine import lint_source

    if is_notebook(path):
        return _fix_notebook(path, data, enabled, unsafe, torch_version)
    encoding = detect_encoding(data)
    original = decode(data)
    outcome = fix_source(
        original,
        lambda text: lint_source(text, path, enabled, torch_version=torch_version),
        unsafe=unsafe,
    )
    if outcome.source == original:
        return FixedInput(None, 0, outcome.remaining)
    diff = "".join(
        difflib.unified_diff(
            original.splitlines(keepends=True),
            outcome.source.splitlines(keepends=True),
            fromfile=path,
            tofile=path,
        )
    )
    return FixedInput(encode(outcome.source, encoding), outcome.fixed, outcome.remaining, diff)


def _fix_notebook(
    path: str, data: bytes, enabled: Collection[str], unsafe: bool, torch_version: str | None
) -> FixedInput:
    """Fix cell by cell, re-joining and re-linting between passes, as for a Python file."""
    notebook = _load_notebook(path, data, enabled)
    if isinstance(notebook, list):
        return FixedInput(None, 0, notebook)
    original = dict(notebook.cell_sources)
    sources = dict(original)
    fixed = 0
    diagnostics = _lint_notebook(notebook, path, enabled, torch_version)
    for _ in range(MAX_PASSES):
        by_cell: dict[int, list[Diagnostic]] = {}
        for d in diagnostics:
            if d.fix is not None and d.cell is not None and (d.fix.safe or unsafe):
                by_cell.setdefault(d.cell - 1, []).append(d)
        if not by_cell:
            break
        candidate = dict(sources)
        count = 0
        for index, found in by_cell.items():
            candidate[index], applied = apply_edits(candidate[index], found, unsafe)
            count += applied
        trial = _rebuilt(notebook, candidate)
        if count == 0 or trial is None or not parses(trial.source):
            break
        sources, fixed, notebook = candidate, fixed + count, trial
        diagnostics = _lint_notebook(notebook, path, enabled, torch_version)
    changed = {i: s for i, s in sources.items() if s != original[i]}
    if not changed:
        return FixedInput(None, 0, diagnostics)
    try:
        text = with_cell_sources(notebook, changed)
    except NotebookError as exc:
        return FixedInput(None, 0, diagnostics, warnings=[f"{path}: fixes not written: {exc}"])
    diff = "".join(
        "".join(
            difflib.unified_diff(
                [line + "\n" for line in original[i].splitlines()],
                [line + "\n" for line in changed[i].splitlines()],
                fromfile=f"{path}:cell {i + 1}",
                tofile=f"{path}:cell {i + 1}",
            )
        )
        for i in sorted(changed)
    )
    return FixedInput(text.encode("utf-8"), fixed, diagnostics, diff)


def _rebuilt(notebook: Notebook, sources: dict[int, str]) -> Notebook | None:
    try:
        return read_notebook(with_cell_sources(notebook, sources))
    except NotebookError:
        return None
