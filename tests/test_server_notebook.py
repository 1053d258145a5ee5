"""The language server on Jupyter notebooks (LSP notebook document sync), driven by pytest-lsp.

The client announces notebook support as VS Code does, opens notebooks cell by cell and edits
them (cell text, added, removed and moved cells); diagnostics must land on each cell's URI in
the cell's own coordinates, as the command line reports `.ipynb` files.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path

import attrs
import pytest

pytest_lsp = pytest.importorskip("pytest_lsp", reason="pytest-lsp is not installed")
from lsprotocol import converters, types  # noqa: E402
from pygls.workspace import Workspace  # noqa: E402
from pytest_lsp import (  # noqa: E402
    ClientServerConfig,
    LanguageClient,
    client_capabilities,
    make_test_lsp_client,
)

from torchlint.notebook import notebook_from_cells  # noqa: E402
from torchlint.registry import all_rules  # noqa: E402
from torchlint.server.app import NOTEBOOK_SYNC, code_cells  # noqa: E402

SUPPORT = Path(__file__).resolve().parent / "test_server_support.py"
TIMEOUT = 20.0

aio = pytest.mark.asyncio(loop_scope="module")

IMPORTS = (
    "%matplotlib inline\n"
    "!pip install x\n"
    "import torch\n"
    "import torch.nn as nn\n"
    "import torch.nn.functional as F"
)
MODEL = "model = nn.Linear(784, 10)\ncriterion = nn.CrossEntropyLoss()"
STEP = (
    "x, y = torch.randn(4, 784), torch.tensor([1, 2, 3, 4])\n"
    "probs = F.softmax(model(x), dim=1)\n"
    "loss = criterion(probs, y)\n"
    "loss.backward()"
)


def make_client() -> LanguageClient:
    """pytest-lsp's client, also answering `client/registerCapability` as editors do."""
    client = make_test_lsp_client()

    @client.feature(types.CLIENT_REGISTER_CAPABILITY)
    def register(ls: LanguageClient, params: types.RegistrationParams) -> None:
        pass

    return client


def vscode_with_notebooks() -> types.ClientCapabilities:
    """VS Code's recorded capabilities plus the notebook support VS Code announces."""
    return attrs.evolve(
        client_capabilities("visual_studio_code"),
        notebook_document=types.NotebookDocumentClientCapabilities(
            synchronization=types.NotebookDocumentSyncClientCapabilities(
                dynamic_registration=True, execution_summary_support=True
            )
        ),
    )


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("nbws")


@pytest_lsp.fixture(
    scope="module",
    config=ClientServerConfig(
        server_command=[sys.executable, str(SUPPORT)], client_factory=make_client
    ),
)
async def client(request: pytest.FixtureRequest, lsp_client: LanguageClient):
    root = request.getfixturevalue("workspace")
    result = await lsp_client.initialize_session(
        types.InitializeParams(
            capabilities=vscode_with_notebooks(),
            root_uri=root.as_uri(),
            workspace_folders=[types.WorkspaceFolder(uri=root.as_uri(), name="ws")],
            initialization_options={"debounceMs": 10, "shapes": False},
        )
    )
    lsp_client.initialize_result = result  # type: ignore[attr-defined]
    yield
    await lsp_client.shutdown_session()


# --- a notebook as the client holds it ----------------------------------------------------------


class Notebook:
    """An open notebook: cells as (URI, kind, text, version), kept in the client's order."""

    def __init__(self, client: LanguageClient, path: Path, cells: list[tuple[str, str]]) -> None:
        """`cells`: (kind, text) with kind "code" or "markdown"."""
        self.client, self.path = client, path
        self.uri = path.as_uri()
        self.version = 1
        self._next = 0
        self.cells: list[dict] = [self._cell(kind, text) for kind, text in cells]
        client.notebook_document_did_open(
            types.DidOpenNotebookDocumentParams(
                notebook_document=types.NotebookDocument(
                    uri=self.uri,
                    notebook_type="jupyter-notebook",
                    version=self.version,
                    cells=[self._lsp_cell(c) for c in self.cells],
                ),
                cell_text_documents=[self._item(c) for c in self.cells],
            )
        )

    def _cell(self, kind: str, text: str) -> dict:
        # As VS Code writes them: the notebook's path, a base64 fragment, percent-encoded.
        uri = f"vscode-notebook-cell:{self.path.as_posix()}#W{self._next}sZmlsZQ%3D%3D"
        self._next += 1
        return {"uri": uri, "kind": kind, "text": text, "version": 1}

    @staticmethod
    def _lsp_cell(cell: dict) -> types.NotebookCell:
        kind = (
            types.NotebookCellKind.Code if cell["kind"] == "code" else types.NotebookCellKind.Markup
        )
        return types.NotebookCell(kind=kind, document=cell["uri"])

    @staticmethod
    def _item(cell: dict) -> types.TextDocumentItem:
        language = "python" if cell["kind"] == "code" else "markdown"
        return types.TextDocumentItem(
            uri=cell["uri"], language_id=language, version=cell["version"], text=cell["text"]
        )

    def uri_of(self, index: int) -> str:
        return self.cells[index]["uri"]

    def _change(self, cells: types.NotebookDocumentCellChanges) -> None:
        self.version += 1
        self.client.notebook_document_did_change(
            types.DidChangeNotebookDocumentParams(
                notebook_document=types.VersionedNotebookDocumentIdentifier(
                    uri=self.uri, version=self.version
                ),
                change=types.NotebookDocumentChangeEvent(cells=cells),
            )
        )

    def edit(self, index: int, old: str, new: str) -> None:
        """Replace the first `old` in a cell by `new`, sent as an incremental edit."""
        cell = self.cells[index]
        text = cell["text"]
        assert "\n" not in old
        offset = text.index(old)
        line = text.count("\n", 0, offset)
        character = offset - (text.rfind("\n", 0, offset) + 1)  # ASCII: code units = chars
        end_line, end_character = line, character + len(old)
        cell["text"] = text.replace(old, new, 1)
        cell["version"] += 1
        self._change(
            types.NotebookDocumentCellChanges(
                text_content=[
                    types.NotebookDocumentCellContentChanges(
                        document=types.VersionedTextDocumentIdentifier(
                            uri=cell["uri"], version=cell["version"]
                        ),
                        changes=[
                            types.TextDocumentContentChangePartial(
                                range=types.Range(
                                    types.Position(line, character),
                                    types.Position(end_line, end_character),
                                ),
                                text=new,
                            )
                        ],
                    )
                ]
            )
        )

    def apply(self, index: int, edits: list[types.TextEdit]) -> None:
        """Apply a code action's edits (cell coordinates) to a cell; send the new text."""
        lines = self.cells[index]["text"].split("\n")
        starts = [0]
        for line in lines:
            starts.append(starts[-1] + len(line) + 1)
        text = self.cells[index]["text"]
        for e in sorted(edits, key=lambda e: (e.range.start.line, e.range.start.character))[::-1]:
            start = starts[e.range.start.line] + e.range.start.character
            end = starts[e.range.end.line] + e.range.end.character
            text = text[:start] + e.new_text + text[end:]
        self.replace(index, text)

    def replace(self, index: int, text: str) -> None:
        cell = self.cells[index]
        cell["text"], cell["version"] = text, cell["version"] + 1
        self._change(
            types.NotebookDocumentCellChanges(
                text_content=[
                    types.NotebookDocumentCellContentChanges(
                        document=types.VersionedTextDocumentIdentifier(
                            uri=cell["uri"], version=cell["version"]
                        ),
                        changes=[types.TextDocumentContentChangeWholeDocument(text=text)],
                    )
                ]
            )
        )

    def splice(self, start: int, delete: int, new: list[dict], opened: list[dict]) -> None:
        """Replace `delete` cells at `start` by `new`; `opened` are cells new to the client."""
        removed = self.cells[start : start + delete]
        self.cells[start : start + delete] = new
        closed = [c for c in removed if c not in new]
        self._change(
            types.NotebookDocumentCellChanges(
                structure=types.NotebookDocumentCellChangeStructure(
                    array=types.NotebookCellArrayChange(
                        start=start,
                        delete_count=delete,
                        cells=[self._lsp_cell(c) for c in new],
                    ),
                    did_open=[self._item(c) for c in opened] or None,
                    did_close=[types.TextDocumentIdentifier(uri=c["uri"]) for c in closed] or None,
                )
            )
        )

    def insert(self, index: int, text: str) -> None:
        cell = self._cell("code", text)
        self.splice(index, 0, [cell], [cell])

    def remove(self, index: int) -> None:
        self.splice(index, 1, [], [])

    def move(self, index: int, to: int) -> None:
        """Move one cell, as VS Code reports it: the span between replaced, reordered."""
        low, high = min(index, to), max(index, to)
        span = list(self.cells[low : high + 1])
        cell = span.pop(index - low)
        span.insert(to - low, cell)
        self.splice(low, len(span), span, [])

    def save(self) -> None:
        self.client.notebook_document_did_save(
            types.DidSaveNotebookDocumentParams(
                notebook_document=types.NotebookDocumentIdentifier(uri=self.uri)
            )
        )

    def close(self) -> None:
        self.client.notebook_document_did_close(
            types.DidCloseNotebookDocumentParams(
                notebook_document=types.NotebookDocumentIdentifier(uri=self.uri),
                cell_text_documents=[
                    types.TextDocumentIdentifier(uri=c["uri"]) for c in self.cells
                ],
            )
        )

    def published(self) -> dict[str, list[types.Diagnostic]]:
        """The diagnostics last published on each cell (absent: never published)."""
        return {
            c["uri"]: list(self.client.diagnostics[c["uri"]])
            for c in self.cells
            if c["uri"] in self.client.diagnostics
        }

    async def until(
        self, condition: Callable[[dict[str, list[types.Diagnostic]]], bool]
    ) -> dict[str, list[types.Diagnostic]]:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + TIMEOUT
        while True:
            found = self.published()
            if condition(found):
                return found
            if loop.time() > deadline:
                raise AssertionError(f"diagnostics never matched; last: {found}")
            await asyncio.sleep(0.02)

    def codes(self, index: int) -> list[str]:
        return sorted(str(d.code) for d in self.client.diagnostics.get(self.uri_of(index), []))

    async def actions(
        self, index: int, diagnostic: types.Diagnostic, only: list[str] | None = None
    ) -> list[types.CodeAction]:
        result = await self.client.text_document_code_action_async(
            types.CodeActionParams(
                text_document=types.TextDocumentIdentifier(uri=self.uri_of(index)),
                range=diagnostic.range,
                context=types.CodeActionContext(diagnostics=[diagnostic], only=only),
            )
        )
        return [a for a in result or [] if isinstance(a, types.CodeAction)]


async def wait_for(condition: Callable[[], object]) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + TIMEOUT
    while not condition():
        if loop.time() > deadline:
            raise AssertionError("timed out")
        await asyncio.sleep(0.02)


def codes(diagnostics: list[types.Diagnostic]) -> list[str]:
    return sorted(str(d.code) for d in diagnostics)


def the(found: dict[str, list[types.Diagnostic]], uri: str, code: str) -> types.Diagnostic:
    (d,) = [d for d in found.get(uri, []) if d.code == code]
    return d


def edits_of(action: types.CodeAction, uri: str) -> list[types.TextEdit]:
    """The action's edits, which must all be for `uri`."""
    assert action.edit is not None
    if action.edit.document_changes:
        (change,) = action.edit.document_changes
        assert isinstance(change, types.TextDocumentEdit)
        assert change.text_document.uri == uri
        return [e for e in change.edits if isinstance(e, types.TextEdit)]
    assert action.edit.changes is not None and list(action.edit.changes) == [uri]
    return list(action.edit.changes[uri])


def training_notebook(client: LanguageClient, path: Path) -> Notebook:
    """Markdown, imports (with IPython magics), model and loss, then a training step that
    passes softmax output to the loss defined two cells up."""
    return Notebook(
        client,
        path,
        [
            ("markdown", "# Training\nsoftmax into the loss"),
            ("code", IMPORTS),
            ("code", MODEL),
            ("code", STEP),
        ],
    )


needs_tl101 = pytest.mark.skipif("TL101" not in all_rules(), reason="TL101 is not committed")


# --- what is advertised ------------------------------------------------------------------------


@aio
async def test_advertised_notebook_sync_is_what_lsprotocol_clients_parse(
    client: LanguageClient,
) -> None:
    result = client.initialize_result  # type: ignore[attr-defined]
    # pytest-lsp's client structured the server's reply with lsprotocol's converter.
    sync = result.capabilities.notebook_document_sync
    assert isinstance(sync, types.NotebookDocumentSyncOptions)
    (selector,) = sync.notebook_selector
    assert selector.notebook == "jupyter-notebook"
    assert [c.language for c in selector.cells or []] == ["python"]
    assert sync.save is True
    # And the whole reply survives a trip through JSON and back.
    converter = converters.get_converter()
    raw = json.loads(json.dumps(converter.unstructure(result, types.InitializeResult)))
    assert raw["capabilities"]["notebookDocumentSync"]["notebookSelector"] == [
        {"notebook": "jupyter-notebook", "cells": [{"language": "python"}]}
    ]
    assert converter.structure(raw, types.InitializeResult) == result


def test_the_selector_constant_round_trips() -> None:
    converter = converters.get_converter()
    raw = json.loads(json.dumps(converter.unstructure(NOTEBOOK_SYNC)))
    parsed = converter.structure(raw, types.NotebookDocumentSyncOptions)
    assert converter.unstructure(parsed) == raw


# --- diagnostics per cell ----------------------------------------------------------------------


@aio
@needs_tl101
async def test_bug_across_cells_is_published_on_the_cell_then_fixed(
    client: LanguageClient, workspace: Path
) -> None:
    nb = training_notebook(client, workspace / "train.ipynb")
    step = nb.uri_of(3)
    found = await nb.until(lambda f: "TL101" in codes(f.get(step, [])))
    d = the(found, step, "TL101")
    line = STEP.splitlines()[2]
    assert d.range.start == types.Position(2, line.index("probs"))
    assert d.range.end == types.Position(2, line.index("probs") + len("probs"))
    # The other code cells were published, with nothing: magics are not syntax errors.
    await nb.until(lambda f: f.get(nb.uri_of(1)) == [] and f.get(nb.uri_of(2)) == [])
    assert nb.uri_of(0) not in client.diagnostics  # markdown is not linted
    # An incremental edit of the step cell fixes it.
    nb.edit(3, "F.softmax(model(x), dim=1)", "model(x)")
    await nb.until(lambda f: f.get(step) == [])
    nb.close()
    await nb.until(lambda f: all(ds == [] for ds in f.values()))


@aio
@needs_tl101
async def test_added_removed_and_moved_cells(client: LanguageClient, workspace: Path) -> None:
    nb = training_notebook(client, workspace / "structure.ipynb")
    step = nb.uri_of(3)
    await nb.until(lambda f: "TL101" in codes(f.get(step, [])))
    # Without the cell defining `criterion` the loss is unknown: no TL101.
    model_cell = nb.cells[2]
    nb.remove(2)
    await nb.until(lambda f: codes(f.get(step, [])) == ["TL9901"])
    assert list(client.diagnostics[model_cell["uri"]]) == []
    # A new cell defining it brings TL101 back; the new cell is published on.
    nb.insert(2, MODEL)
    added = nb.uri_of(2)
    await nb.until(lambda f: "TL101" in codes(f.get(step, [])) and f.get(added) == [])
    # A finding in a newly added cell lands on it, in its coordinates.
    nb.insert(4, "z = 1\nw = F.softmax(z, 0)")
    extra = nb.uri_of(4)
    found = await nb.until(lambda f: codes(f.get(extra, [])) == ["TL9901"])
    assert the(found, extra, "TL9901").range.start == types.Position(1, 4)
    # Removing a cell with findings clears them.
    nb.remove(4)
    await nb.until(lambda f: extra not in f)
    await wait_for(lambda: list(client.diagnostics.get(extra, [None])) == [])
    nb.close()


@aio
async def test_cells_are_joined_in_the_current_order(
    client: LanguageClient, workspace: Path
) -> None:
    # Two cells that only parse in this order: a move must reach the joined module.
    nb = Notebook(
        client,
        workspace / "order.ipynb",
        [("code", "import torch"), ("code", "total = sum(["), ("code", "    1, 2])")],
    )
    await nb.until(lambda f: len(f) == 3 and all(ds == [] for ds in f.values()))
    nb.move(2, 1)
    found = await nb.until(lambda f: any("TL000" in codes(ds) for ds in f.values()))
    assert [c["text"] for c in nb.cells][1:] == ["    1, 2])", "total = sum(["]
    assert sum(codes(ds).count("TL000") for ds in found.values()) == 1
    nb.move(1, 2)
    await nb.until(lambda f: all(ds == [] for ds in f.values()))
    nb.close()


@aio
@needs_tl101
async def test_code_actions_and_hover_on_a_cell(client: LanguageClient, workspace: Path) -> None:
    nb = training_notebook(client, workspace / "actions.ipynb")
    step = nb.uri_of(3)
    found = await nb.until(lambda f: codes(f.get(step, [])) == ["TL101", "TL9901"])

    hover = await client.text_document_hover_async(
        types.HoverParams(
            text_document=types.TextDocumentIdentifier(uri=step),
            position=the(found, step, "TL101").range.start,
        )
    )
    assert hover is not None and isinstance(hover.contents, types.MarkupContent)
    assert hover.contents.value.startswith("# softmax-before-cross-entropy (TL101)")
    assert hover.range == the(found, step, "TL101").range

    # A fix, in the cell's coordinates.
    fix = next(
        a
        for a in await nb.actions(3, the(found, step, "TL9901"))
        if a.title == "Fix: use F.log_softmax"
    )
    column = STEP.splitlines()[1].index("F.softmax")
    assert edits_of(fix, step) == [
        types.TextEdit(
            range=types.Range(types.Position(1, column), types.Position(1, column + 9)),
            new_text="F.log_softmax",
        )
    ]

    # "Disable for this line" writes the noqa comment on the cell's line.
    disable = next(
        a
        for a in await nb.actions(3, the(found, step, "TL101"))
        if a.title == "Disable TL101 for this line"
    )
    nb.apply(3, edits_of(disable, step))
    assert nb.cells[3]["text"].splitlines()[2] == "loss = criterion(probs, y)  # noqa: TL101"
    found = await nb.until(lambda f: codes(f.get(step, [])) == ["TL9901"])

    # Fix-all on the cell re-lints it within the notebook (F is imported two cells up).
    only = [types.CodeActionKind.SourceFixAll]
    (fix_all,) = await nb.actions(3, the(found, step, "TL9901"), only)
    nb.apply(3, edits_of(fix_all, step))
    assert "probs = F.log_softmax(model(x), dim=1)" in nb.cells[3]["text"]
    await nb.until(lambda f: "TL9901" not in codes(f.get(step, [])))
    nb.close()


@aio
@needs_tl101
async def test_nearest_configuration_applies_and_save_rereads_it(
    client: LanguageClient, workspace: Path
) -> None:
    project = workspace / "project"
    project.mkdir()
    config = project / "pyproject.toml"
    config.write_text('[tool.torchlint]\nignore = ["TL101"]\n')
    nb = training_notebook(client, project / "configured.ipynb")
    step = nb.uri_of(3)
    await nb.until(lambda f: codes(f.get(step, [])) == ["TL9901"])
    config.write_text("[tool.torchlint]\n")
    stat = config.stat()
    os.utime(config, ns=(stat.st_atime_ns, stat.st_mtime_ns + 2_000_000_000))
    nb.save()
    await nb.until(lambda f: codes(f.get(step, [])) == ["TL101", "TL9901"])
    nb.close()


@aio
async def test_documents_with_escaped_uris_are_linted(
    client: LanguageClient, workspace: Path
) -> None:
    folder = workspace / "with space"
    folder.mkdir()
    path = folder / "x.py"
    uri = path.as_uri()
    assert "%20" in uri
    client.text_document_did_open(
        types.DidOpenTextDocumentParams(
            text_document=types.TextDocumentItem(
                uri=uri,
                language_id="python",
                version=1,
                text="import torch.nn.functional as F\ny = F.softmax(x, 1)\n",
            )
        )
    )
    await wait_for(lambda: codes(list(client.diagnostics.get(uri, []))) == ["TL9901"])
    client.text_document_did_close(
        types.DidCloseTextDocumentParams(text_document=types.TextDocumentIdentifier(uri=uri))
    )


# --- the pieces, in process ---------------------------------------------------------------------


def test_notebook_from_cells_masks_and_maps_lines() -> None:
    notebook = notebook_from_cells(["%matplotlib inline\nimport torch", "", "x = 1\n!ls"])
    lines = notebook.source.splitlines()
    assert lines[0].startswith("pass") and lines[1] == "import torch"
    assert lines[3] == "x = 1" and lines[4].startswith("pass")
    assert notebook.line_map == [(0, 0), (0, 1), (1, 0), (2, 0), (2, 1)]


def test_code_cells_follow_the_workspace_notebook() -> None:
    workspace = Workspace(None)
    kinds = types.NotebookCellKind

    def item(uri: str, language: str, text: str) -> types.TextDocumentItem:
        return types.TextDocumentItem(uri=uri, language_id=language, version=1, text=text)

    workspace.put_notebook_document(
        types.DidOpenNotebookDocumentParams(
            notebook_document=types.NotebookDocument(
                uri="file:///nb.ipynb",
                notebook_type="jupyter-notebook",
                version=1,
                cells=[
                    types.NotebookCell(kind=kinds.Markup, document="cell:a"),
                    types.NotebookCell(kind=kinds.Code, document="cell:b%3D"),
                    types.NotebookCell(kind=kinds.Code, document="cell:c"),
                    types.NotebookCell(kind=kinds.Code, document="cell:d"),
                ],
            ),
            cell_text_documents=[
                item("cell:a", "markdown", "# title"),
                item("cell:b%3D", "python", "b = 1"),
                item("cell:c", "sql", "select 1"),
                item("cell:d", "python", "d = 1"),
            ],
        )
    )
    notebook = workspace.get_notebook_document(notebook_uri="file:///nb.ipynb")
    assert notebook is not None
    found = [(c.uri, c.source, c.number) for c in code_cells(workspace, notebook)]
    assert found == [("cell:b%3D", "b = 1", 2), ("cell:d", "d = 1", 4)]
    # Move d before b (one splice, as VS Code sends it).
    workspace.update_notebook_document(
        types.DidChangeNotebookDocumentParams(
            notebook_document=types.VersionedNotebookDocumentIdentifier(
                uri="file:///nb.ipynb", version=2
            ),
            change=types.NotebookDocumentChangeEvent(
                cells=types.NotebookDocumentCellChanges(
                    structure=types.NotebookDocumentCellChangeStructure(
                        array=types.NotebookCellArrayChange(
                            start=1,
                            delete_count=3,
                            cells=[notebook.cells[3], notebook.cells[1], notebook.cells[2]],
                        )
                    )
                )
            ),
        )
    )
    notebook = workspace.get_notebook_document(notebook_uri="file:///nb.ipynb")
    assert notebook is not None
    assert [c.uri for c in code_cells(workspace, notebook)] == ["cell:d", "cell:b%3D"]
