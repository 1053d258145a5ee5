"""Shape insight tables as text (fitted to the terminal) and as JSON; no torch here.

A table (built by `torchlint.shapes.table` in the worker) is rendered as a header naming the
input and where its shape came from, one row per layer or op in execution order down to the
requested depth, the first failing row marked with its diagnostic, and a footer with the
total parameter count, what the input sizes must satisfy, and the output shape.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

Table = dict[str, Any]

_HEADERS = ("Layer", "Type / arguments", "Input", "Output", "Params", "Line")
#: Columns that give up width first when the table is too wide, and their smallest widths.
_SHRINK = ((1, 16), (2, 16), (3, 16), (0, 10))
_GAP = "  "
_SOURCES = {
    "declared": "declared",
    "tensor": "evidence",
    "image": "evidence",
    "inferred": "inferred from the first layer",
}


@dataclass(frozen=True)
class Style:
    """Characters for terminals that can show them, and ASCII stand-ins."""

    ellipsis: str = "\u2026"
    mark: str = "\u2717"
    dash: str = "\u2014"
    dot: str = "\u00b7"

    @staticmethod
    def for_encoding(encoding: str | None) -> Style:
        try:
            "\u2026\u2717\u2014\u00b7".encode(encoding or "ascii")
        except (UnicodeEncodeError, LookupError):
            return Style("...", "x", "-", "*")
        return Style()


def visible_rows(table: Table, depth: int) -> tuple[list[dict[str, Any]], int | None]:
    """The rows shown at `depth` (containers are transparent), and the one to mark as failed.

    A failure inside a row that is not shown (a Linear inside a block, at depth 1) marks the
    nearest shown row that contains it.
    """
    rows: list[dict[str, Any]] = table.get("rows") or []
    by_index = {r["index"]: r for r in rows}
    shown = [r for r in rows if r["kind"] != "container" and r["depth"] <= depth]
    failed = next((r for r in rows if r.get("failed")), None)
    marked = None
    while failed is not None:
        if failed["kind"] != "container" and failed["depth"] <= depth:
            marked = failed["index"]
            break
        failed = by_index.get(failed["parent"]) if failed.get("parent") is not None else None
    return shown, marked


def shapes_text(items: list[dict[str, Any]] | None, style: Style) -> str:
    if not items:
        return ""
    texts = [i["shape"] for i in items]
    if len(texts) > 1 and len(set(texts)) == 1:
        return (
            f"{len(texts)} {style.dot} {texts[0]}"
            if style.dot != "*"
            else f"{len(texts)}x {texts[0]}"
        )
    joined = ", ".join(texts)
    if len(texts) > 1 and len(joined) > 32:
        return f"{texts[0]} +{len(texts) - 1}"  # an LSTM's (output, (h, c)): the output first
    return joined


def _line(row: dict[str, Any], table: Table) -> str:
    if not row.get("line"):
        return ""
    path = row.get("path")
    if path and path != table.get("path"):
        return f"{os.path.basename(path)}:{row['line']}"
    if row.get("cell"):  # a notebook's cell
        return f"cell {row['cell']}:{row['line']}"
    return str(row["line"])


def _params(value: int | None) -> str:
    return "" if value is None else f"{value:,}"


def _cells(row: dict[str, Any], table: Table, depth_indent: bool, style: Style) -> list[str]:
    indent = "  " * (row["depth"] - 1) if depth_indent else ""
    if row["kind"] == "op":
        name, kind = row["type"], row["name"]
    elif row["kind"] == "error":
        name, kind = f"({row['name']})", "raised in forward"
    else:
        name, kind = row["name"] or "(model)", row["detail"]
    return [
        indent + name,
        kind,
        shapes_text(row.get("inputs"), style),
        shapes_text(row.get("outputs"), style),
        _params(row.get("params")),
        _line(row, table),
    ]


def _cut(text: str, width: int, style: Style, keep_end: bool = True) -> str:
    """Shorten from the middle, keeping both ends (`[N, 64, (H-1)/…, (W-1)/8+1]`)."""
    if len(text) <= width:
        return text
    if width <= len(style.ellipsis) + 1:
        return text[:width]
    room = width - len(style.ellipsis)
    head = (room + 1) // 2 if keep_end else room
    tail = room - head
    return text[:head] + style.ellipsis + (text[len(text) - tail :] if tail else "")


def _width(widths: list[int]) -> int:
    return sum(widths) + len(_GAP) * (len(widths) - 1)


def fit(widths: list[int], limit: int, columns: list[int] | None = None) -> list[int]:
    """Column widths that fit `limit` characters (with gaps): the widest flexible column gives
    up a character at a time, none below its smallest width. `columns`: which of the table's
    columns `widths` are (all, by default)."""
    widths = list(widths)
    columns = columns if columns is not None else list(range(len(widths)))
    total = _width(widths)
    smallest = {columns.index(c): w for c, w in _SHRINK if c in columns}
    while total > limit:
        column = max(smallest, key=lambda c: (widths[c] - smallest[c], widths[c]))
        if widths[column] <= smallest[column]:
            break
        widths[column] -= 1
        total -= 1
    return widths


def render_table(
    table: Table,
    *,
    depth: int = 1,
    width: int = 100,
    style: Style | None = None,
    display: str | None = None,
) -> str:
    """One model's table as text, at most `width` characters wide where possible."""
    style = style or Style()
    cell = f"cell {table['cell']}:" if table.get("cell") else ""
    where = f"{display or table.get('path', '')}:{cell}{table.get('line', '?')}"
    title = f"{table['model']} ({where})"
    out = [title, "=" * min(len(title), width)]
    if table.get("status") == "skipped" or "rows" not in table:
        reason = table.get("reason") or "no table"
        reason = reason.removeprefix(f"shape check of {table['model']} skipped: ")
        out.append(f"No table: {reason}")
        return "\n".join(out) + "\n"
    out.append(_input_line(table, style))
    if table.get("note"):
        out.append(f"Note: {table['note']}")
    out.append("")
    shown, marked = visible_rows(table, depth)
    indent = depth > 1
    body = [_cells(r, table, indent, style) for r in shown]
    for cells, row in zip(body, shown, strict=True):
        if row["index"] == marked:
            code = _definite(table)
            cells[3] = f"{style.mark} {code}" if code else f"{style.mark} fails"
    natural = [max([len(h)] + [len(c[i]) for c in body]) for i, h in enumerate(_HEADERS)]
    # An op's source text (`x.view(x.size(0), -1)`) never makes the column wider than the
    # layers' arguments need.
    layers = [len(c[1]) for c, r in zip(body, shown, strict=True) if r["kind"] != "op"]
    natural[1] = min(natural[1], max([len(_HEADERS[1]), 24, *layers]))
    columns = list(range(len(_HEADERS)))
    if _width(natural) > width:
        # Each row's input is mostly the previous row's output: the column to give up first.
        columns.remove(2)
    widths = fit([natural[c] for c in columns], width, [c for c in columns])
    right = {columns.index(4), columns.index(5)}
    text_column = columns.index(1)

    def line(kept: list[str], cut_end: bool = True) -> str:
        parts = []
        for i, (cell, size) in enumerate(zip(kept, widths, strict=True)):
            cell = _cut(cell, size, style, keep_end=i != text_column or cut_end)
            parts.append(cell.rjust(size) if i in right else cell.ljust(size))
        return _GAP.join(parts).rstrip()

    out.append(line([_HEADERS[c] for c in columns], cut_end=False))
    out.append(line(["-" * w for w in widths]))
    for cells, row in zip(body, shown, strict=True):
        out.append(line([cells[c] for c in columns], cut_end=row["kind"] != "op"))
        if row["index"] == marked:
            out.append(_failure_text(table, row, style))
    out.append("")
    out.extend(_footer(table, marked is not None, style))
    return "\n".join(out) + "\n"


def _input_line(table: Table, style: Style) -> str:
    info = table.get("input") or {}
    names = info.get("names") or []
    parts = []
    for i, shape in enumerate(info.get("shapes", [])):
        name = names[i] if i < len(names) else f"input {i}"
        dtype = (info.get("dtypes") or [""] * (i + 1))[i]
        parts.append(f"{name}: {shape} {dtype}".rstrip())
    source = _SOURCES.get(info.get("source", ""), info.get("source", ""))
    label = info.get("label") or ""
    origin = f"{source}: {label}" if label and source != "inferred from the first layer" else source
    if info.get("symbolic"):
        sizes = ", ".join(f"{k}={v}" for k, v in (info.get("sizes") or {}).items())
        origin += f"; symbolic sizes (run at {sizes})" if sizes else "; symbolic sizes"
    return f"Input  {', '.join(parts)} {style.dash} {origin}"


def _definite(table: Table) -> str | None:
    """The TL601-TL605 code of the table's finding, if it has one."""
    code = (table.get("finding") or {}).get("code")
    return code if code in ("TL601", "TL602", "TL603", "TL604", "TL605") else None


def _failure_text(table: Table, row: dict[str, Any], style: Style) -> str:
    finding = table.get("finding") or {}
    if _definite(table) and finding.get("message"):
        return f"  {style.mark} {finding['code']} {finding['message']}"
    failed = next((r for r in table.get("rows", []) if r.get("failed")), row)
    return f"  {style.mark} {failed.get('error', 'the run failed here')}"


def _footer(table: Table, failed: bool, style: Style) -> list[str]:
    out = [f"Total params: {_params(table.get('params'))}"]
    for constraint in table.get("constraints") or []:
        text = constraint if style.dot != "*" else constraint.replace("\u00b7", "*")
        out.append(f"Input must satisfy: {text}")
    finding = table.get("finding")
    if failed:
        out.append("Output: none (the run stops at the first failure)")
        if finding and finding.get("message") and not _definite(table):
            out.append(f"Note: {finding['code']} {finding['message']}")
    else:
        outputs = table.get("output") or []
        if len(outputs) == 1 and not outputs[0]["name"]:
            out.append(f"Output: {outputs[0]['shape']}")
        elif outputs:
            out.append("Output: " + ", ".join(f"{o['name']} {o['shape']}" for o in outputs))
        if finding and finding.get("message"):
            out.append(f"Note: {finding['code']} {finding['message']}")
    return out


def to_json(tables: list[Table], displays: dict[str, str] | None = None) -> list[Table]:
    """The tables as JSON data, paths as the user gave them."""
    displays = displays or {}
    out = []
    for table in tables:
        item = dict(table)
        item["path"] = displays.get(table.get("path", ""), table.get("path"))
        rows = []
        for row in item.get("rows") or []:
            row = dict(row)
            if row.get("path"):
                row["path"] = displays.get(row["path"], row["path"])
            rows.append(row)
        if "rows" in item:
            item["rows"] = rows
        out.append(item)
    return out
