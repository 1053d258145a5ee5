"""Shape insight in the editor: inlay hints with tensor shapes, and hover on layers.

Both come from the per-layer tables of the document's last shape check (run on open and
save, `torchlint.shapes.table`), and only while the text is exactly what was checked: after
an edit the hints go until the next check. A table row carries the source span of the call
that produced it, so an assignment whose value is that call (`x = self.pool(...)`) shows the
row's output shape at its end, and `self.fc1` in its class shows the layer's sizes and the
shapes it was called with.

No torch here: the tables are plain data.
"""

from __future__ import annotations

import ast
import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from lsprotocol import types

from torchlint.shapes.render import Style, shapes_text

if TYPE_CHECKING:
    from torchlint.server.app import TorchlintServer

Table = dict[str, Any]
Span = tuple[int, int, int, int]  #: 1-based lines, 0-based character columns, end exclusive

_STYLE = Style()
_MAX_CALLS = 4


@dataclass(frozen=True)
class Hint:
    line: int  #: 1-based
    column: int  #: 0-based character column
    label: str
    tooltip: str


# --- tables -----------------------------------------------------------------------------------


def ranked(tables: list[Table]) -> list[tuple[int, Table]]:
    """Tables with rank 0 for models no other table contains, 1 for parts of bigger models.

    A block checked on its own runs on an inferred input; inside the model that uses it, on
    what that model gives it, which is what the user's code does.
    """
    used = {
        row["type"]
        for table in tables
        for row in table.get("rows") or []
        if row["kind"] in ("module", "container")
    }
    return sorted(
        ((1 if table.get("class") in used else 0, table) for table in tables),
        key=lambda item: item[0],
    )


def _char(line_text: str, byte_column: int) -> int:
    return len(line_text.encode("utf-8")[:byte_column].decode("utf-8", errors="ignore"))


def _span(lines: list[str], node: ast.AST) -> Span | None:
    end_line = getattr(node, "end_lineno", None)
    end_col = getattr(node, "end_col_offset", None)
    if end_line is None or end_col is None:
        return None
    line = node.lineno  # type: ignore[attr-defined]
    if not (1 <= line <= len(lines) and 1 <= end_line <= len(lines)):
        return None
    return (
        line,
        _char(lines[line - 1], node.col_offset),  # type: ignore[attr-defined]
        end_line,
        _char(lines[end_line - 1], end_col),
    )


def _parse(source: str) -> ast.Module | None:
    try:
        return ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):  # the last two: absurd nesting
        return None


# --- inlay hints ------------------------------------------------------------------------------


def shape_hints(source: str, path: str, tables: list[Table]) -> list[Hint]:
    """`: [N, 6, H/2-2, W/2-2]` at the end of each assignment whose value a table row made."""
    tree = _parse(source)
    if tree is None or not tables:
        return []
    path = os.path.abspath(path)
    outputs: dict[Span, list[tuple[int, str, str]]] = {}
    for rank, table in ranked(tables):
        for row in table.get("rows") or []:
            span, text = row.get("span"), shapes_text(row.get("outputs"), _STYLE)
            if span and text and row.get("path") and os.path.abspath(row["path"]) == path:
                outputs.setdefault(tuple(span), []).append((rank, text, table["model"]))  # type: ignore[arg-type]
    if not outputs:
        return []
    lines = source.splitlines()
    hints = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
            key = _span(lines, node.value)
        elif isinstance(node, ast.AugAssign):
            key = _span(lines, node)  # `out += identity`: the statement is the op
        else:
            continue
        end = _span(lines, node)
        found = outputs.get(key) if key is not None else None
        if not found or end is None:
            continue
        best = min(rank for rank, _, _ in found)
        texts = list(dict.fromkeys(text for rank, text, _ in found if rank == best))
        models = list(dict.fromkeys(model for rank, _, model in found if rank == best))
        label = texts[0] if len(texts) == 1 else " | ".join(texts[:2])
        if len(texts) > 2:
            label += f" | {_STYLE.ellipsis}"
        tooltip = f"tensor shape in the shape check of {', '.join(models)}"
        hints.append(Hint(end[2], end[3], f": {label}", tooltip))
    return sorted(hints, key=lambda h: (h.line, h.column))


async def inlay_hints(ls: TorchlintServer, params: types.InlayHintParams) -> list[types.InlayHint]:
    """The hints of the document's last shape check, if it checked this very text."""
    uri = params.text_document.uri
    state = ls.states.get(uri)
    doc = ls.document(uri)
    if state is None or doc is None or state.linted is None or not state.shape_tables:
        return []
    if state.shape_source != doc.source or state.linted.text.source != doc.source:
        return []  # edited since the check: its hints would point at the wrong code
    text = state.linted.text
    first, last = params.range.start.line + 1, params.range.end.line + 1
    found = []
    for hint in shape_hints(doc.source, state.linted.display, state.shape_tables):
        if not first <= hint.line <= last:
            continue
        found.append(
            types.InlayHint(
                position=text.position_at(text.offset(hint.line, hint.column + 1)),
                label=hint.label,
                kind=types.InlayHintKind.Type,
                padding_left=True,
                tooltip=hint.tooltip,
            )
        )
    return found


# --- hover on layers --------------------------------------------------------------------------


def _attributes(tree: ast.Module) -> Iterator[tuple[str, ast.Attribute]]:
    """(enclosing class, `self.<name>` node) for every attribute of `self` in a class."""

    def visit(node: ast.AST, owner: str | None) -> Iterator[tuple[str, ast.Attribute]]:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.ClassDef):
                yield from visit(child, child.name)
                continue
            if (
                owner is not None
                and isinstance(child, ast.Attribute)
                and isinstance(child.value, ast.Name)
                and child.value.id == "self"
            ):
                yield owner, child
            yield from visit(child, owner)

    yield from visit(tree, None)


def layer_at(source: str, line: int, column: int) -> tuple[str, str, Span] | None:
    """(class, attribute, span of `self.attr`) under a 1-based line, 0-based column."""
    tree = _parse(source)
    if tree is None:
        return None
    lines = source.splitlines()
    for owner, node in _attributes(tree):
        span = _span(lines, node)
        if span is None or span[0] != line or span[2] != line:
            continue
        if span[1] <= column <= span[3]:
            return owner, node.attr, span
    return None


def _holder(row: dict[str, Any], by_index: dict[int, dict[str, Any]], table: Table) -> str:
    """The class whose `self.<name>` the row's module is: the nearest enclosing call that is
    not a container (an nn.Sequential's layers belong to the Sequential's owner)."""
    parent = by_index.get(row["parent"]) if row.get("parent") is not None else None
    while parent is not None and parent["kind"] == "container":
        parent = by_index.get(parent["parent"]) if parent.get("parent") is not None else None
    return parent["type"] if parent is not None else str(table.get("class"))


def layer_markdown(tables: list[Table], owner: str, attr: str) -> str | None:
    """What the tables know of `self.<attr>` in class `owner`: the layer, its calls."""
    info = None
    calls: list[tuple[int, str, str, str, str, str]] = []
    for rank, table in ranked(tables):
        rows = table.get("rows") or []
        by_index = {row["index"]: row for row in rows}
        for module in table.get("modules") or []:
            if info is None and module["attr"] == attr and module["owner"] == owner:
                info = module
        for row in rows:
            if row["kind"] not in ("module", "container"):
                continue
            if row["name"].rsplit(".", 1)[-1] != attr or _holder(row, by_index, table) != owner:
                continue
            output = shapes_text(row.get("outputs"), _STYLE)
            if row.get("failed"):
                code = (table.get("finding") or {}).get("code")
                output = f"{_STYLE.mark} {code}" if code else f"{_STYLE.mark} fails"
            line = str(row.get("line") or "")
            shape_in = shapes_text(row.get("inputs"), _STYLE)
            call = (rank, line, row["detail"], shape_in, output, table["model"])
            if call not in calls:
                calls.append(call)
    if calls:
        best = min(call[0] for call in calls)
        calls = [call for call in calls if call[0] == best]
    if info is None and not calls:
        return None
    details = list(dict.fromkeys(call[2] for call in calls))
    several = len(details) > 1  # a block built with other sizes in each place it is used
    detail = info["detail"] if info is not None else details[0]
    head = f"**`self.{attr}`**: `{detail}`"
    params = info.get("params") if info is not None else None
    if several:
        head = f"**`self.{attr}`**: {len(details)} layers built with different sizes"
    elif params is not None:
        head += f", {params:,} parameters"
    out = [head]
    if calls:
        out += ["", "| line | layer | input | output |" if several else "| line | input | output |"]
        out.append("|---:|---|---|---|" if several else "|---:|---|---|")
        for _, line, layer, shape_in, shape_out, _ in calls[:_MAX_CALLS]:
            middle = f" `{layer}` |" if several else ""
            out.append(f"| {line} |{middle} `{shape_in}` | `{shape_out}` |")
        if len(calls) > _MAX_CALLS:
            out.append(f"\n{_STYLE.ellipsis} and {len(calls) - _MAX_CALLS} more calls")
        models = ", ".join(dict.fromkeys(f"`{c[5]}`" for c in calls))
        out += ["", f"_Shapes from the shape check of {models}._"]
    return "\n".join(out)


def hover(
    ls: TorchlintServer, uri: str, source: str, line: int, column: int
) -> tuple[str, Span] | None:
    """Markdown about the layer under the cursor, if the last shape check saw this text."""
    state = ls.states.get(uri)
    if state is None or not state.shape_tables or state.shape_source != source:
        return None
    found = layer_at(source, line, column)
    if found is None:
        return None
    owner, attr, span = found
    markdown = layer_markdown(state.shape_tables, owner, attr)
    return (markdown, span) if markdown else None
