"""Requests answered from the latest lint of a document: code actions and hover."""

from __future__ import annotations

import asyncio
from bisect import bisect_right
from typing import TYPE_CHECKING

from lsprotocol import types

from torchlint.server import actions, inlay
from torchlint.server.convert import SOURCE, overlaps, to_lsp
from torchlint.server.hover import codes_at, hover_text

if TYPE_CHECKING:
    from torchlint.server.app import Linted, TorchlintServer

FIX_ALL = f"{types.CodeActionKind.SourceFixAll.value}.torchlint"
CODE_ACTION_KINDS = [types.CodeActionKind.QuickFix, FIX_ALL]


def workspace_edit(
    ls: TorchlintServer, uri: str, edits: list[types.TextEdit]
) -> types.WorkspaceEdit:
    """Edits to one document, tied to its version when the client supports that."""
    doc = ls.document(uri)
    capabilities = ls.client_capabilities.workspace
    versioned = bool(
        capabilities
        and capabilities.workspace_edit
        and capabilities.workspace_edit.document_changes
    )
    if versioned and doc is not None:
        return types.WorkspaceEdit(
            document_changes=[
                types.TextDocumentEdit(
                    text_document=types.OptionalVersionedTextDocumentIdentifier(
                        uri=uri, version=doc.version
                    ),
                    edits=edits,
                )
            ]
        )
    return types.WorkspaceEdit(changes={uri: edits})


async def code_actions(
    ls: TorchlintServer, params: types.CodeActionParams
) -> list[types.CodeAction]:
    """Per diagnostic: its fix and "Disable ... for this line"; per document: fix-all."""
    uri = params.text_document.uri
    linted = await ls.fresh(uri)
    if linted is None:
        return []
    only = params.context.only

    def wanted(kind: str) -> bool:
        return not only or any(kind == k or kind.startswith(f"{k}.") for k in only)

    found: list[types.CodeAction] = []
    if wanted(types.CodeActionKind.QuickFix):
        found += quick_fixes(ls, uri, linted, params)
    fixable = any(d.fix is not None and d.fix.safe for d in linted.diagnostics)
    if wanted(FIX_ALL) and fixable:
        action = await fix_all(ls, uri, linted)
        if action is not None:
            found.append(action)
    return found


def quick_fixes(
    ls: TorchlintServer, uri: str, linted: Linted, params: types.CodeActionParams
) -> list[types.CodeAction]:
    text = linted.text
    start, end = text.offset_of(params.range.start), text.offset_of(params.range.end)
    # Clients also name the diagnostics they mean (Neovim: those on the cursor's line).
    named = {
        (d.code, d.range.start.line, d.range.start.character)
        for d in params.context.diagnostics
        if d.source == SOURCE
    }
    found = []
    for d in ls.shown(uri, linted):
        lsp = to_lsp(d, text)
        key = (d.code, lsp.range.start.line, lsp.range.start.character)
        if not overlaps(text, d, start, end) and key not in named:
            continue
        if d.fix is not None and d.fix.edits:
            found.append(
                types.CodeAction(
                    title=f"Fix: {d.fix.message}" + ("" if d.fix.safe else " (unsafe)"),
                    kind=types.CodeActionKind.QuickFix,
                    diagnostics=[lsp],
                    is_preferred=d.fix.safe,
                    edit=workspace_edit(ls, uri, [text.text_edit(e) for e in d.fix.edits]),
                )
            )
        edit = actions.noqa_edit(text, d)
        if edit is not None:
            found.append(
                types.CodeAction(
                    title=f"Disable {d.code} for this line",
                    kind=types.CodeActionKind.QuickFix,
                    diagnostics=[lsp],
                    edit=workspace_edit(ls, uri, [text.text_edit(edit)]),
                )
            )
    return found


async def fix_all(ls: TorchlintServer, uri: str, linted: Linted) -> types.CodeAction | None:
    """One edit applying every safe fix (re-linting between passes), or None if nothing changes.

    A notebook cell is re-linted within its notebook: its findings depend on the other cells.
    """
    source = linted.text.source
    loop = asyncio.get_running_loop()
    fixed = await loop.run_in_executor(ls.linter, actions.fix_all, source, linted.lint, ls.encoding)
    if fixed == source:
        return None
    start, end, new_text = actions.replacement(source, fixed)
    edit = types.TextEdit(
        range=types.Range(linted.text.position_at(start), linted.text.position_at(end)),
        new_text=new_text,
    )
    return types.CodeAction(
        title="torchlint: fix all auto-fixable problems",
        kind=FIX_ALL,
        edit=workspace_edit(ls, uri, [edit]),
    )


async def hover(ls: TorchlintServer, params: types.HoverParams) -> types.Hover | None:
    """The documentation of the rules reported under the cursor, or named in `# noqa: ...`;
    on a layer (`self.fc1`), its sizes and shapes from the last shape check."""
    uri = params.text_document.uri
    linted = await ls.fresh(uri)
    if linted is None:
        return None
    text = linted.text
    offset = text.offset_of(params.position)
    codes, span = codes_at(text, ls.shown(uri, linted), offset)
    value = hover_text(codes)
    line = bisect_right(text.starts, offset)
    layer = inlay.hover(ls, uri, text.source, line, offset - text.starts[line - 1])
    if layer is not None:
        markdown, (start_line, start_col, end_line, end_col) = layer
        value = markdown if value is None else f"{markdown}\n\n---\n\n{value}"
        if span is None:
            span = (text.offset(start_line, start_col + 1), text.offset(end_line, end_col + 1))
    if value is None or span is None:
        return None
    return types.Hover(
        contents=types.MarkupContent(kind=types.MarkupKind.Markdown, value=value),
        range=types.Range(text.position_at(span[0]), text.position_at(span[1])),
    )
