"""Shape insight for the command line: `torchlint shapes PATH[::Class]` (no torch here).

The named files are checked by the shape engine's worker (`check_files(..., tables=...)`),
which never runs the user's scripts: it imports them through the slicing loader, builds the
models on the meta device and runs them on fake tensors, under its time and memory limits.
Other files of the project that mention the classes serve as evidence for input shapes
(a test's `model(torch.randn(4, 3, 32, 32))`), as they do for `torchlint check`.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from torchlint.diagnostic import Diagnostic
from torchlint.errors import TorchlintError
from torchlint.notebook import (
    NOTEBOOK_SUFFIX,
    Notebook,
    NotebookError,
    cell_references,
    read_notebook,
    to_cell_diagnostic,
)

Table = dict[str, Any]

#: What the tables are made for: Python files, and notebooks by their joined code cells.
_SUFFIXES = (".py", NOTEBOOK_SUFFIX)
#: At most this many other project files are read for evidence.
_EVIDENCE_FILES = 2000
_SEPARATOR = "::"


@dataclass(frozen=True)
class Target:
    """A file, and optionally one class (or module-level model) in it."""

    path: Path
    name: str | None = None

    @staticmethod
    def parse(text: str) -> Target:
        path, _, name = text.partition(_SEPARATOR)
        return Target(Path(path), name or None)


@dataclass
class Insight:
    """The tables of the requested models, and why others have none."""

    tables: list[Table] = field(default_factory=list)
    #: (display path, model name, line, reason) for models that have no table.
    skipped: list[tuple[str, str, int, str]] = field(default_factory=list)
    #: abspath -> the path as the user gave it.
    displays: dict[str, str] = field(default_factory=dict)
    diagnostics: dict[str, list[Diagnostic]] = field(default_factory=dict)


def collect(targets: list[Target], *, timeout: float = 20.0) -> Insight:
    """Check the targets' files and describe their models, layer by layer."""
    from torchlint.shapes import check_files, discover, torch_available

    if not torch_available():
        raise TorchlintError("`torchlint shapes` needs torch; install it (pip install torch)")
    sources: dict[str, str] = {}
    displays: dict[str, str] = {}
    notebooks: dict[str, Notebook] = {}
    named: dict[str, set[str] | None] = {}
    for target in targets:
        for file in _files(target.path):
            display = str(file)
            if display not in sources:
                text = _read(file)
                if file.suffix == NOTEBOOK_SUFFIX:
                    notebooks[display] = _notebook(file, text)
                    text = notebooks[display].source  # its code cells, joined
                sources[display] = text
                displays[os.path.abspath(display)] = display
            names = named.setdefault(display, set())
            if target.name is None or names is None:
                named[display] = None
            else:
                names.add(target.name)
    infos = {info.path: info for info in discover.scan(list(sources.items()))}
    wanted: dict[str, dict[str, int]] = {}
    for display, names in named.items():
        models = _models(infos.get(display))
        for name in names or ():
            if name not in models:
                raise TorchlintError(f"{display}: no nn.Module class or model named {name!r}")
        wanted[display] = {n: line for n, line in models.items() if names is None or n in names}
    only = {(display, name) for display, models in wanted.items() for name in models}
    class_names = {name for _, name in only}
    files = list(sources.items()) + _evidence(targets, class_names, set(sources))
    tables: dict[str, list[Table]] = {}
    diagnostics = check_files(
        files, declared=_declared(targets), timeout=timeout, tables=tables, only=only
    )
    insight = Insight(displays=displays, diagnostics=diagnostics)
    for display, models in wanted.items():
        described = set()
        for table in tables.get(display, []):
            if table["model"] in models:
                insight.tables.append(table)
                described.add(table["model"])
        for name, line in sorted(models.items(), key=lambda item: item[1]):
            if name not in described:
                reason = (
                    _reason(diagnostics.get(display, []), line)
                    or _inside(name, insight.tables)
                    or "not checked"
                )
                insight.skipped.append((display, name, line, reason))
    for display, notebook in notebooks.items():
        _in_cells(insight, display, notebook)
    return insight


def _notebook(path: Path, text: str) -> Notebook:
    try:
        return read_notebook(text)
    except NotebookError as exc:
        raise TorchlintError(f"{path}: cannot read notebook: {exc}") from None


def _in_cells(insight: Insight, display: str, notebook: Notebook) -> None:
    """A notebook's tables and skips with their lines in its cells (`cell` and the line in
    it), as its diagnostics have them: the joined module's lines are no use to a reader."""
    abspath = os.path.abspath(display)

    def place(line: int) -> tuple[int, int]:
        index, within = notebook.line_map[min(max(line, 1), len(notebook.line_map)) - 1]
        return notebook.cell_number(index), within + 1

    for table in insight.tables:
        if table.get("path") not in (display, abspath) or not notebook.line_map:
            continue
        if isinstance(table.get("line"), int):
            table["cell"], table["line"] = place(table["line"])
        described = table.get("input") or {}
        if described.get("label"):  # the evidence's place: `used at mnist.ipynb:cell 4:1`
            described["label"] = cell_references(notebook, described["label"], display)
        for row in table.get("rows") or []:
            if row.get("line") and row.get("path", table["path"]) in (display, abspath):
                row["cell"], row["line"] = place(row["line"])
        finding = table.get("finding")
        if finding and isinstance(finding.get("line"), int):
            moved = to_cell_diagnostic(notebook, _as_diagnostic(finding, display))
            table["finding"] = {
                **finding,
                "cell": moved.cell,
                "line": moved.line,
                "message": moved.message,
            }
    insight.skipped = [
        (path, name, line, reason)
        if path != display or not notebook.line_map
        else (path, name, "cell {}:{}".format(*place(line)), reason)
        for path, name, line, reason in insight.skipped
    ]


def _as_diagnostic(finding: dict[str, Any], display: str) -> Diagnostic:
    line, column = finding["line"], finding.get("col") or 1
    code, message = finding.get("code", ""), finding.get("message", "")
    return Diagnostic(display, line, column, line, column, code, code, message)


def _files(path: Path) -> list[Path]:
    if path.is_dir():
        return sorted(p for p in path.rglob("*") if p.suffix in _SUFFIXES and p.is_file())
    if path.is_file():
        if path.suffix not in _SUFFIXES:
            raise TorchlintError(f"{path}: shape tables are made for .py files and notebooks")
        return [path]
    raise TorchlintError(f"{path}: no such file or directory")


def _models(info: Any) -> dict[str, int]:
    """Model name -> line, for the classes and module-level models of a scanned file."""
    if info is None:
        return {}
    found = {name: cls.line for name, cls in info.classes.items()}
    lines = info.source.splitlines()
    for name in info.module_level:
        pattern = re.compile(rf"^(?:{re.escape(name)}\s*=|def {re.escape(name)}\b)")
        found[name] = next((i for i, t in enumerate(lines, 1) if pattern.match(t)), 1)
    return found


def _inside(name: str, tables: list[Table]) -> str | None:
    """ "checked inside ResNet (layer1.0)": a block with no table of its own."""
    for table in tables:
        row = next((r for r in table.get("rows", []) if r.get("type") == name), None)
        if row is not None:
            return f"checked inside {table['model']} (as {row['name']}); see its table"
    return None


def _reason(diagnostics: list[Diagnostic], line: int) -> str | None:
    for d in diagnostics:
        if d.code == "TL690" and d.line == line:
            return d.message.removeprefix("shape check skipped: ")
    return None


def _read(path: Path) -> str:
    try:
        return path.read_bytes().decode("utf-8", errors="replace")
    except OSError as exc:
        raise TorchlintError(f"{path}: cannot read ({exc.strerror})") from None


def _declared(targets: list[Target]) -> dict[str, Any]:
    """`[tool.torchlint.shapes]` entries of the targets' configuration."""
    from torchlint.config import settings_for

    declared: dict[str, Any] = {}
    for target in targets:
        try:
            declared.update(dict(settings_for(target.path).config.declared_shapes))
        except TorchlintError:
            continue
    return declared


def _evidence(targets: list[Target], names: set[str], taken: set[str]) -> list[tuple[str, str]]:
    """Files near the targets that mention the models: call sites and example inputs.

    Read: the target's own folder, and the `tests`/`test` folders beside it and beside its
    parents up to the project's root (the folder of its configuration file).
    """
    if not names:
        return []
    pattern = re.compile(r"\b(?:" + "|".join(map(re.escape, sorted(names))) + r")\b")
    taken_abs = {os.path.abspath(p) for p in taken}
    found: list[tuple[str, str]] = []
    read = 0
    for path in _nearby(targets):
        if read >= _EVIDENCE_FILES:
            break
        if os.path.abspath(path) in taken_abs:
            continue
        taken_abs.add(os.path.abspath(path))
        read += 1
        try:
            text = path.read_bytes().decode("utf-8", errors="replace")
        except OSError:
            continue
        if pattern.search(text):
            found.append((str(path), text))
    return found


def _nearby(targets: list[Target]) -> Iterator[Path]:
    from torchlint.config import config_for

    for target in targets:
        start = target.path if target.path.is_dir() else target.path.parent
        start = start.resolve()
        root = config_for(target.path).root.resolve()
        folders = [start]
        if root == start or root in start.parents:
            folders += [p for p in start.parents if p == root or root in p.parents]
        else:
            folders += list(start.parents)[:2]
        if not target.path.is_dir():
            yield from sorted(start.glob("*.py"))
        for folder in folders:
            for name in ("tests", "test"):
                tests = folder / name
                if tests.is_dir():
                    yield from _python_files(tests)


def _python_files(folder: Path) -> Iterator[Path]:
    for directory, subdirectories, files in os.walk(folder):
        subdirectories[:] = sorted(
            d for d in subdirectories if not d.startswith(".") and d != "__pycache__"
        )
        for name in sorted(files):
            if name.endswith(".py"):
                yield Path(directory, name)


def run_command(
    targets: list[str], *, depth: int, output_format: str, width: int | None = None
) -> int:
    """`torchlint shapes`: print the tables; 1 when a model fails (TL601-TL605), else 0."""
    import json
    import shutil
    import sys

    from torchlint.shapes.render import Style, render_table, to_json

    if depth < 1:
        raise TorchlintError("--depth must be at least 1")
    insight = collect([Target.parse(t) for t in targets])
    definite = ("TL601", "TL602", "TL603", "TL604", "TL605")
    failing = any((t.get("finding") or {}).get("code") in definite for t in insight.tables)
    if output_format == "json":
        payload = {
            "models": to_json(insight.tables, insight.displays),
            "skipped": [
                {"path": path, "model": name, "line": line, "reason": reason}
                for path, name, line, reason in insight.skipped
            ],
        }
        sys.stdout.write(json.dumps(payload, indent=2) + "\n")
        return 1 if failing else 0
    width = width or shutil.get_terminal_size((100, 24)).columns
    style = Style.for_encoding(getattr(sys.stdout, "encoding", None))
    parts = [
        render_table(
            table,
            depth=depth,
            width=width,
            style=style,
            display=insight.displays.get(table.get("path", "")),
        )
        for table in insight.tables
    ]
    for path, name, line, reason in insight.skipped:
        parts.append(f"{name} ({path}:{line}): no table: {_skip_text(reason)}\n")
    if not parts:
        parts.append("No nn.Module classes or module-level models found.\n")
    sys.stdout.write("\n".join(parts))
    return 1 if failing else 0


def _skip_text(reason: str) -> str:
    if reason == "not checked":
        return "not checked on its own (it has no forward, or other models build it)"
    return reason
