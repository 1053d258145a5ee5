"""Jupyter notebooks as lint input: code cells joined into one module, IPython syntax masked.

Diagnostics come back with the cell (1-based, counting every cell as Jupyter shows them) and the
line within it. Fixes are applied to the cell sources and written back into the JSON without
disturbing anything else: outputs, metadata, ids, key order, indentation.
"""

from __future__ import annotations

import io
import json
import os
import re
import tokenize
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from torchlint.diagnostic import Diagnostic, Edit, Fix

NOTEBOOK_SUFFIX = ".ipynb"
# Cell magics whose body is not Python: the whole cell is left out of the analysis.
_FOREIGN_CELL_MAGICS = frozenset(
    {
        "bash",
        "sh",
        "script",
        "html",
        "javascript",
        "js",
        "latex",
        "markdown",
        "svg",
        "perl",
        "ruby",
        "writefile",
        "file",
        "sql",
        "system",
        "python2",
        "pypy",
        "cmd",
        "powershell",
    }
)
_MAGIC_LINE = re.compile(r"^(\s*)(%|!|\?)")
_SHELL_ASSIGN = re.compile(r"^(\s*)[\w.,\s()\[\]]+=\s*(!|%)")
_HELP_LINE = re.compile(r"^\s*(\?\??[\w.]+|[\w.]+\?\??)\s*$")
_MASK = "pass  # torchlint: masked IPython syntax"


class NotebookError(Exception):
    """The file is not a notebook torchlint can read (invalid JSON, not nbformat 4)."""


@dataclass
class Notebook:
    """A parsed notebook and the Python module made of its code cells."""

    text: str
    data: dict[str, Any]
    #: Index (in `data["cells"]`) of each code cell, in order.
    code_cells: list[int]
    #: The cell sources as stored, by index in `data["cells"]`.
    cell_sources: dict[int, str]
    #: The joined, masked module.
    source: str = ""
    #: For each line of `source` (0-based), the (cell index, 0-based line in the cell).
    line_map: list[tuple[int, int]] = field(default_factory=list)
    #: For each line of `source`, the columns of leading indent removed from the cell's line.
    column_shift: list[int] = field(default_factory=list)
    #: The number the user sees for a cell index, where it is not the index + 1 (an editor's
    #: code cells, given without the markdown between them).
    numbers: dict[int, int] = field(default_factory=dict)

    def cell_number(self, index: int) -> int:
        """How the user counts cells: 1-based, every cell included."""
        return self.numbers.get(index, index + 1)


def _cell_source(cell: dict[str, Any]) -> str:
    source = cell.get("source", "")
    return "".join(source) if isinstance(source, list) else str(source)


def read_notebook(text: str) -> Notebook:
    """Parse and validate a notebook with nbformat; build its Python module."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise NotebookError(f"not valid JSON: {exc.msg} (line {exc.lineno})") from None
    except RecursionError:
        raise NotebookError("its JSON is nested too deeply to read") from None
    except ValueError as exc:  # an integer too long to convert, among others
        raise NotebookError(f"not readable JSON: {str(exc).split(';')[0]}") from None
    if not isinstance(data, dict) or data.get("nbformat") != 4:
        found = data.get("nbformat") if isinstance(data, dict) else None
        raise NotebookError(f"not an nbformat 4 notebook (nbformat: {found!r})")
    try:
        import nbformat

        with warnings.catch_warnings():  # nbformat's own advice (cell ids) is not ours to print
            warnings.simplefilter("ignore")
            nbformat.validate(nbformat.from_dict(data), version=4)
    except ImportError:  # pragma: no cover - nbformat is a dependency
        pass
    except Exception as exc:
        message = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise NotebookError(f"not a valid nbformat 4 notebook: {message}") from None
    cells = data.get("cells", [])
    code = [i for i, cell in enumerate(cells) if cell.get("cell_type") == "code"]
    notebook = Notebook(
        text=text,
        data=data,
        code_cells=code,
        cell_sources={i: _cell_source(cells[i]) for i in code},
    )
    _join(notebook)
    return notebook


def notebook_from_cells(cells: list[str], numbers: Sequence[int] = ()) -> Notebook:
    """The module of code cells given as texts (an editor's open notebook), masked as on disk.

    Cell `i` of the list is cell index `i`: diagnostics mapped with `to_cell_diagnostic` name
    `cell=i + 1`, or `numbers[i]` when given (the cell's number among all the notebook's).
    """
    notebook = Notebook(
        text="",
        data={"nbformat": 4, "cells": [{"cell_type": "code", "source": s} for s in cells]},
        code_cells=list(range(len(cells))),
        cell_sources=dict(enumerate(cells)),
        numbers=dict(enumerate(numbers)),
    )
    _join(notebook)
    return notebook


def mask_cell(source: str) -> list[str]:
    """The cell's lines with IPython-only syntax replaced by `pass` (same line count)."""
    lines = source.split("\n")
    first = lines[0].strip() if lines else ""
    if first.startswith("%%"):
        name = first[2:].split(maxsplit=1)[0] if len(first) > 2 else ""
        if name in _FOREIGN_CELL_MAGICS:
            return [""] * len(lines)
        lines = [_MASK, *lines[1:]]  # %%time, %%capture, ...: the body is Python
    masked = []
    continued: str | None = None  # the indent of a magic line that ended with `\`
    for line in lines:
        match = _MAGIC_LINE.match(line) or _SHELL_ASSIGN.match(line)
        if match and _inside_statement(masked):
            match = None  # `% (a, b)` or `!= b` carrying on an open bracket is Python
        if continued is not None:
            masked.append(continued + _MASK)  # `!pip install \` goes on, indented or not
        elif match or _HELP_LINE.match(line):
            continued = re.match(r"\s*", line).group()  # type: ignore[union-attr]
            masked.append(continued + _MASK)
        else:
            masked.append(line)
        if not line.rstrip().endswith("\\"):
            continued = None
    return masked


def _inside_statement(lines: list[str]) -> bool:
    """Whether the Python lines so far end inside an open bracket, string or `\\` line."""
    if not lines or not any(line.strip() for line in lines):
        return False
    try:
        for _ in tokenize.generate_tokens(io.StringIO("\n".join(lines) + "\n").readline):
            pass
    except tokenize.TokenError:
        return True  # EOF in a multi-line statement or string
    except SyntaxError:
        return False
    return False


def _dedent_cell(lines: list[str]) -> tuple[list[str], list[int]]:
    """Lines without the first line's indent, as IPython runs a cell that starts indented."""
    first = lines[0] if lines else ""
    indent = first[: len(first) - len(first.lstrip(" \t"))] if first.strip() else ""
    if not indent:
        return lines, [0] * len(lines)
    shifts = [len(indent) if line.startswith(indent) else 0 for line in lines]
    return [line[shift:] for line, shift in zip(lines, shifts, strict=True)], shifts


def _join(notebook: Notebook) -> None:
    lines: list[str] = []
    line_map: list[tuple[int, int]] = []
    column_shift: list[int] = []
    for index in notebook.code_cells:
        cell_lines, shifts = _dedent_cell(mask_cell(notebook.cell_sources[index]))
        for number, line in enumerate(cell_lines):
            lines.append(line)
            line_map.append((index, number))
        column_shift += shifts
    notebook.source = "\n".join(lines) + "\n"
    notebook.line_map = line_map
    notebook.column_shift = column_shift


def _shift(notebook: Notebook, line: int) -> int:
    """Columns to add to a position on 1-based `line` of the joined module."""
    shifts = notebook.column_shift
    return shifts[min(line, len(shifts)) - 1] if shifts else 0


def to_cell_diagnostic(notebook: Notebook, diagnostic: Diagnostic) -> Diagnostic:
    """Re-address a diagnostic of the joined module to its cell and line within the cell."""
    if not notebook.line_map:
        return replace(diagnostic, cell=None)
    index, line = notebook.line_map[min(diagnostic.line, len(notebook.line_map)) - 1]
    end_index, end_line = notebook.line_map[min(diagnostic.end_line, len(notebook.line_map)) - 1]
    column = diagnostic.column + _shift(notebook, diagnostic.line)
    if end_index != index:  # a range running into the next cell stops at this one's end
        end_line, end_column = line, column
    else:
        end_column = diagnostic.end_column + _shift(notebook, diagnostic.end_line)
    fix = _cell_fix(notebook, diagnostic.fix, index) if diagnostic.fix else None
    return replace(
        diagnostic,
        message=cell_references(notebook, diagnostic.message, diagnostic.path),
        cell=notebook.cell_number(index),
        line=line + 1,
        column=column,
        end_line=end_line + 1,
        end_column=end_column,
        fix=fix,
    )


#: A place in a file named in a message (`mnist.ipynb:18`, evidence or a frame of the engine).
_PLACE = re.compile(r"(?P<name>[^\s:()\[\]{},;'\"`]+):(?P<line>\d+)\b")
#: A line of the same file named in a message (`on line 12`, `at line 40`).
_SAME_FILE_LINE = re.compile(r"\b(?P<word>at|on) line (?P<line>\d+)\b")


def cell_references(notebook: Notebook, message: str, path: str) -> str:
    """The message with the lines it names in the joined module (`mnist.ipynb:18`, `at line
    40`) named by their cell, as the user finds them (`mnist.ipynb:cell 4:1`, `at cell 4,
    line 1`). Places in other files are left as they are."""
    if not notebook.line_map or ("line " not in message and ":" not in message):
        return message
    base = os.path.basename(path)

    def cell_line(line: int) -> tuple[int, int] | None:
        if not 1 <= line <= len(notebook.line_map):
            return None
        index, within = notebook.line_map[line - 1]
        return notebook.cell_number(index), within + 1

    def place(match: re.Match[str]) -> str:
        name = match["name"]
        found = cell_line(int(match["line"])) if os.path.basename(name) == base else None
        return f"{name}:cell {found[0]}:{found[1]}" if found else match[0]

    def same_file(match: re.Match[str]) -> str:
        found = cell_line(int(match["line"]))
        return f"{match['word']} cell {found[0]}, line {found[1]}" if found else match[0]

    return _SAME_FILE_LINE.sub(same_file, _PLACE.sub(place, message))


def _cell_fix(notebook: Notebook, fix: Fix, index: int) -> Fix | None:
    """The fix in cell coordinates; None when an edit leaves the diagnostic's cell."""
    edits = []
    for edit in fix.edits:
        start = notebook.line_map[min(edit.start_line, len(notebook.line_map)) - 1]
        end = notebook.line_map[min(edit.end_line, len(notebook.line_map)) - 1]
        if edit.start_line > len(notebook.line_map):
            return None
        if start[0] != end[0]:
            return None
        if start[0] != index and not (edit.start_line == 1 and edit.start_column == 1):
            return None  # an insertion at the very top (an import) lands in the first cell
        start_column = edit.start_column + _shift(notebook, edit.start_line)
        end_column = edit.end_column + _shift(notebook, edit.end_line)
        edits.append(Edit(start[1] + 1, start_column, end[1] + 1, end_column, edit.content))
    if not edits:
        return None
    return Fix(fix.message, tuple(edits), fix.safe)


def with_cell_sources(notebook: Notebook, sources: dict[int, str]) -> str:
    """The notebook's JSON text with the given cell sources; everything else byte-identical.

    Raises NotebookError when the file's JSON layout cannot be reproduced exactly.
    """
    indent = _detect_indent(notebook.text)
    trailing = notebook.text[len(notebook.text.rstrip("\r\n")) :]
    # JSON escapes newlines inside strings, so every raw one is layout: keep the file's kind.
    newline = "\r\n" if "\r\n" in notebook.text else "\n"

    def dump(data: dict[str, Any]) -> str:
        text = json.dumps(data, indent=indent, ensure_ascii=False)
        return (text.replace("\n", newline) if newline != "\n" else text) + trailing

    if dump(notebook.data) != notebook.text:
        raise NotebookError("its JSON layout is unusual, so it cannot be rewritten exactly")
    data = json.loads(notebook.text)
    for index, text in sources.items():
        cell = data["cells"][index]
        cell["source"] = (
            text.splitlines(keepends=True) if isinstance(cell["source"], list) else text
        )
    return dump(data)


def _detect_indent(text: str) -> int | None:
    match = re.search(r"\n( +)\"", text)
    return len(match.group(1)) if match else None
