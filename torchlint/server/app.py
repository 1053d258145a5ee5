"""The language server's state: open documents, their lints, and when to lint them.

Source rules run on the buffer text (never the file on disk) in one lint thread, debounced
after edits; an edit that arrives while a lint waits supersedes it. Shape checks run on open
and save only, in a worker process (`shapes.ShapeRunner`), and join the published diagnostics
when they finish, unless an edit made them stale first.

Notebooks (LSP notebook document sync) are linted as the command line lints `.ipynb` files:
their Python code cells, in order, joined into one module with IPython syntax masked
(`torchlint.notebook`). Each cell gets its share of the findings, in its own coordinates, on
its own URI; code actions and hover on a cell work on that share.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import traceback
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any
from urllib.parse import unquote

from lsprotocol import types
from pygls.exceptions import JsonRpcInvalidParams
from pygls.lsp.server import LanguageServer
from pygls.uris import to_fs_path
from pygls.workspace import TextDocument, Workspace

from torchlint import __version__
from torchlint.diagnostic import Diagnostic
from torchlint.engine import INTERNAL_ERROR, LintRecord, active_rules, file_error, lint_source
from torchlint.inputs import may_hold_model
from torchlint.noqa import apply_suppressions
from torchlint.notebook import Notebook, notebook_from_cells, to_cell_diagnostic
from torchlint.server.convert import Text, to_lsp
from torchlint.server.protocol import TorchlintProtocol
from torchlint.server.relint import carried
from torchlint.server.reparse import ParsedText, reparse
from torchlint.server.settings import (
    CONFIG_FILE_NAMES,
    DocumentSettings,
    Options,
    forget_configuration,
    settings_for,
    shapes_installed,
)
from torchlint.server.shapes import ShapeRunner

PYTHON_SUFFIXES = (".py", ".pyi")
logger = logging.getLogger(__name__)

#: Jupyter notebooks, with their Python cells. Every filter names its `notebook`: lsprotocol
#: (2025.0) cannot read a filter with `cells` only (it has no structure hook for the optional
#: `notebook` of `NotebookDocumentFilterWithCells`), so a client built on it would fail to
#: initialize. `tests/test_server_notebook.py` parses what is advertised.
NOTEBOOK_SYNC = types.NotebookDocumentSyncOptions(
    notebook_selector=[
        types.NotebookDocumentFilterWithNotebook(
            notebook="jupyter-notebook", cells=[types.NotebookCellLanguage(language="python")]
        )
    ],
    save=True,
)


@dataclass
class Linted:
    """One lint of one version of a document."""

    text: Text
    display: str
    settings: DocumentSettings
    diagnostics: list[Diagnostic]
    #: The text's tree, kept to re-parse the next version by its edit (`reparse`).
    parsed: ParsedText | None = None

    def lint(self, source: str) -> list[Diagnostic]:
        """Lint another text of this document as this lint did (fix-all's passes)."""
        return lint_source(
            source, self.display, self.settings.enabled, torch_version=self.settings.torch_version
        )


@dataclass
class CellLinted(Linted):
    """One code cell's share of a notebook lint: its text, its findings in its coordinates."""

    #: The cell's URI as the client sent it (diagnostics are published on it).
    uri: str = ""
    version: int | None = None
    #: The text of every code cell linted, in order; this cell is `sources[index]`.
    sources: tuple[str, ...] = ()
    index: int = 0

    def lint(self, source: str) -> list[Diagnostic]:
        """This cell's findings with `source` in its place, the other cells unchanged."""
        sources = list(self.sources)
        sources[self.index] = source
        found = lint_cells(
            sources, self.display, self.settings.enabled, self.settings.torch_version
        )
        return [d for d in found if d.cell == self.index + 1]


@dataclass
class NotebookLinted(Linted):
    """One lint of a notebook: `text` is the joined module, `cells` each code cell's share.

    `diagnostics` are all findings, re-addressed to cells numbered by position in the notebook
    (as the client synced it: VS Code leaves out cells the selector does not match).
    """

    #: Shares by cell URI, unquoted as the workspace keys documents.
    cells: dict[str, CellLinted] = field(default_factory=dict)
    #: (cell URI, text) of each code cell linted: the lint is stale once this changes.
    snapshot: tuple[tuple[str, str], ...] = ()
    #: Each code cell's number among all the notebook's cells, in the order linted.
    numbers: tuple[int, ...] = ()


@dataclass(frozen=True)
class CellText:
    """A Python code cell of an open notebook, as it is now."""

    uri: str
    source: str
    version: int | None
    #: 1-based position among the notebook's cells (markdown included, when synced).
    number: int


@dataclass
class DocumentState:
    linted: Linted | None = None
    #: Order of submission of the lint that produced `linted`; older results never win.
    sequence: int = -1
    lint_task: asyncio.Task[None] | None = None
    shape_task: asyncio.Task[None] | None = None
    #: Shape findings and the exact source they were computed for.
    shape_diagnostics: list[Diagnostic] = field(default_factory=list)
    shape_source: str | None = None
    #: Per-layer tables of the models checked for `shape_source` (inlay hints, hover).
    shape_tables: list[dict[str, Any]] = field(default_factory=list)
    logged: set[str] = field(default_factory=set)
    #: The last text of this document that parsed, with its tree: the next lint re-parses
    #: only the statements an edit touched.
    parsed: ParsedText | None = None
    #: A notebook's cells as last published: URI -> (version, diagnostics). Unchanged cells
    #: are not sent again; cells no longer linted are cleared.
    published: dict[str, tuple[int | None, list[types.Diagnostic]]] = field(default_factory=dict)


def lint_document(
    path: Path | None,
    display: str,
    source: str,
    root: Path | None,
    encoding: str,
    previous: ParsedText | None = None,
) -> Linted:
    """Lint a buffer (runs in the lint thread); `previous`, an earlier text's parse, spares
    re-parsing the statements the edits since then left alone."""
    settings = settings_for(path, root)
    text = Text(source, encoding)
    if settings.excluded:
        return Linted(text, display, settings, [])
    too_large = _over_size_limit(source, display, settings)
    if too_large or not active_rules(source, settings.enabled):
        diagnostics = too_large or lint_source(
            source, display, settings.enabled, torch_version=settings.torch_version
        )
        return Linted(text, display, settings, diagnostics)
    parsed = reparse(previous, source)
    if not isinstance(parsed, ParsedText):  # why it does not parse
        diagnostics = lint_source(
            source, display, settings.enabled, torch_version=settings.torch_version, parsed=parsed
        )
        return Linted(text, display, settings, diagnostics)
    key = (display, frozenset(settings.enabled), settings.torch_version)
    earlier = previous.lints.get(key) if previous is not None else None
    found = carried(earlier, previous, parsed, display, settings.enabled) if earlier else None
    if found is not None:  # an edit of comments or spacing: the same findings, moved
        diagnostics, record = found
        parsed.lints.clear()
        parsed.lints[key] = record
        return Linted(text, display, settings, diagnostics, parsed)
    record = LintRecord()
    diagnostics = lint_source(
        source,
        display,
        settings.enabled,
        torch_version=settings.torch_version,
        parsed=parsed.module,
        locator=parsed.locate,
        index=parsed.tree_index(),
        texts=parsed.texts,
        record=record,
    )
    parsed.lints.clear()
    parsed.lints[key] = record
    return Linted(text, display, settings, diagnostics, parsed)


def _over_size_limit(source: str, display: str, settings: DocumentSettings) -> list[Diagnostic]:
    """A diagnostic saying why a buffer over `max-file-size-kb` is not analysed, or []."""
    limit = settings.max_file_size_kb
    if len(source) <= limit * 1024 // 4:  # fewer characters than that cannot be larger
        return []
    size = len(source.encode("utf-8", errors="surrogatepass"))
    if size <= limit * 1024:
        return []
    return [
        file_error(display, f"not analysed: {size / 1e6:.1f} MB is over max-file-size-kb ({limit})")
    ]


def lint_cells(
    sources: Sequence[str],
    display: str,
    enabled: frozenset[str],
    torch_version: str | None = None,
) -> list[Diagnostic]:
    """Lint code cells as one notebook; findings name their cell (`cell=i + 1` for `sources[i]`)
    and count lines within it."""
    return _lint_joined(notebook_from_cells(list(sources)), display, enabled, torch_version)


def _lint_joined(
    notebook: Notebook, display: str, enabled: frozenset[str], torch_version: str | None
) -> list[Diagnostic]:
    found = lint_source(notebook.source, display, enabled, torch_version=torch_version)
    return [to_cell_diagnostic(notebook, d) for d in found]


def lint_notebook(
    path: Path | None, display: str, cells: Sequence[CellText], root: Path | None, encoding: str
) -> NotebookLinted:
    """Lint an open notebook's code cells (runs in the lint thread)."""
    settings = settings_for(path, root)
    sources = tuple(cell.source for cell in cells)
    numbers = tuple(cell.number for cell in cells)
    # Findings name each cell by its number in the notebook, in their cell and in messages.
    notebook = notebook_from_cells(list(sources), numbers)
    if settings.excluded:
        found = []
    else:
        found = [
            replace(d, cell=numbers[0] if numbers else 1)
            for d in _over_size_limit(notebook.source, display, settings)
        ] or _lint_joined(notebook, display, settings.enabled, settings.torch_version)
    index_of = {number: index for index, number in enumerate(numbers)}
    shares: list[list[Diagnostic]] = [[] for _ in cells]
    for d in found:
        if d.cell in index_of:
            shares[index_of[d.cell]].append(d)
    return NotebookLinted(
        text=Text(notebook.source, encoding),
        display=display,
        settings=settings,
        diagnostics=found,
        cells={
            unquote(cell.uri): CellLinted(
                Text(cell.source, encoding),
                display,
                settings,
                shares[index],
                uri=cell.uri,
                version=cell.version,
                sources=sources,
                index=index,
            )
            for index, cell in enumerate(cells)
        },
        snapshot=tuple((cell.uri, cell.source) for cell in cells),
        numbers=numbers,
    )


def code_cells(workspace: Workspace, notebook: types.NotebookDocument) -> list[CellText]:
    """The notebook's Python code cells, in the notebook's order, with their text now."""
    found = []
    for number, cell in enumerate(notebook.cells, 1):
        if cell.kind != types.NotebookCellKind.Code:
            continue
        doc = workspace.text_documents.get(unquote(cell.document))
        if doc is None or doc.language_id not in (None, "python"):
            continue  # a cell in another language (an R or SQL cell) is not Python
        found.append(CellText(cell.document, doc.source, doc.version, number))
    return found


def fs_path(uri: str) -> Path | None:
    """The file behind a `file:` URI; None for unsaved buffers and other schemes."""
    path = to_fs_path(uri)
    return Path(path) if path else None


class TorchlintServer(LanguageServer):
    def __init__(self) -> None:
        super().__init__(
            "torchlint",
            __version__,
            protocol_cls=TorchlintProtocol,
            text_document_sync_kind=types.TextDocumentSyncKind.Incremental,
            notebook_document_sync=NOTEBOOK_SYNC,
        )
        self.options = Options()
        self.states: dict[str, DocumentState] = {}
        self.linter = ThreadPoolExecutor(max_workers=1, thread_name_prefix="torchlint-lint")
        self.shapes = ShapeRunner(log=lambda message: self.log(message, types.MessageType.Warning))
        self._sequence = itertools.count()
        self._announced: set[str] = set()

    # --- plumbing ------------------------------------------------------------------------------

    def log(self, message: str, kind: types.MessageType = types.MessageType.Info) -> None:
        try:
            self.window_log_message(types.LogMessageParams(type=kind, message=message))
        except Exception:  # no client to tell (shutting down): stderr it is
            logger.warning("%s", message)

    def log_error(self, what: str) -> None:
        """Log the exception being handled; the server carries on."""
        self.log(f"{what}:\n{traceback.format_exc()}", types.MessageType.Error)

    def announce(self, message: str) -> None:
        """Show a message once per session (configuration errors)."""
        if message not in self._announced:
            self._announced.add(message)
            self.log(message, types.MessageType.Error)
            self.window_show_message(
                types.ShowMessageParams(type=types.MessageType.Error, message=message)
            )

    @property
    def encoding(self) -> str:
        return str(self.workspace.position_encoding or types.PositionEncodingKind.Utf16)

    def document(self, uri: str) -> TextDocument | None:
        """An open Python document (pygls would otherwise read unknown ones from disk)."""
        # The workspace keys documents by unquoted URI (`file:///a%20b.py`, cell fragments).
        doc = self.workspace.text_documents.get(unquote(uri))
        if doc is None:
            return None
        if doc.language_id not in (None, "python") and not doc.path.endswith(PYTHON_SUFFIXES):
            return None
        return doc

    def require_open(self, uri: str) -> None:
        """Refuse a request about a document the client never opened (an LSP error)."""
        if unquote(uri) not in self.workspace.text_documents and self.notebook(uri) is None:
            raise JsonRpcInvalidParams(f"document not open: {uri}")

    def notebook(self, uri: str) -> types.NotebookDocument | None:
        """An open notebook."""
        return self.workspace.get_notebook_document(notebook_uri=uri)

    def code_cells(self, notebook: types.NotebookDocument) -> list[CellText]:
        return code_cells(self.workspace, notebook)

    def root(self) -> Path | None:
        root = self.workspace.root_path
        return Path(root) if root else None

    # --- linting -------------------------------------------------------------------------------

    def schedule(self, uri: str, delay: float = 0.0, shapes: bool = False) -> None:
        """Lint `uri` after `delay` seconds, superseding a lint that has not reported yet."""
        state = self.states.setdefault(uri, DocumentState())
        if state.lint_task is not None and not state.lint_task.done():
            state.lint_task.cancel()
        state.lint_task = asyncio.ensure_future(self._lint_later(uri, delay, shapes))

    async def _lint_later(self, uri: str, delay: float, shapes: bool) -> None:
        try:
            if delay:
                await asyncio.sleep(delay)
            await self.lint_now(uri, shapes=shapes)
        except asyncio.CancelledError:
            raise
        except Exception:
            self.log_error(f"torchlint failed on {uri}")

    async def lint_now(self, uri: str, *, shapes: bool = False) -> Linted | None:
        notebook = self.notebook(uri)
        if notebook is not None:
            linted_notebook = await self._lint_notebook_now(uri, notebook)
            if shapes:
                self.start_shapes(uri, linted_notebook)
            return linted_notebook
        doc = self.document(uri)
        if doc is None:
            return None
        path = Path(doc.path) if to_fs_path(uri) else None
        display = str(path) if path is not None else uri
        sequence = next(self._sequence)
        loop = asyncio.get_running_loop()
        state = self.states.get(uri)
        previous = state.parsed if state is not None else None
        linted = await loop.run_in_executor(
            self.linter,
            lint_document,
            path,
            display,
            doc.source,
            self.root(),
            self.encoding,
            previous,
        )
        state = self.states.get(uri)
        if state is not None and linted.parsed is not None:
            state.parsed = linted.parsed  # a parse of some version: a base for the next edit
        if state is None or self.document(uri) is None or sequence < state.sequence:
            return linted  # closed meanwhile, or a newer lint already reported
        state.linted, state.sequence = linted, sequence
        self._report_problems(state, linted)
        self.publish(uri)
        if shapes:
            self.start_shapes(uri, linted)
        return linted

    async def _lint_notebook_now(
        self, uri: str, notebook: types.NotebookDocument
    ) -> NotebookLinted:
        path = fs_path(uri)
        display = str(path) if path is not None else uri
        cells = self.code_cells(notebook)  # the text now, before the lint thread runs
        sequence = next(self._sequence)
        loop = asyncio.get_running_loop()
        linted = await loop.run_in_executor(
            self.linter, lint_notebook, path, display, cells, self.root(), self.encoding
        )
        state = self.states.get(uri)
        if state is None or self.notebook(uri) is None or sequence < state.sequence:
            return linted
        state.linted, state.sequence = linted, sequence
        self._report_problems(state, linted)
        self.publish(uri)
        return linted

    def _report_problems(self, state: DocumentState, linted: Linted) -> None:
        if linted.settings.error:
            self.announce(
                f"torchlint: invalid configuration ({linted.settings.error}); using defaults"
            )
        for d in linted.diagnostics:
            if d.code == INTERNAL_ERROR and d.message not in state.logged:
                state.logged.add(d.message)
                where = f"{d.path}:cell {d.cell}" if d.cell is not None else d.path
                self.log(f"{where}:{d.line}:{d.column}: {d.message}", types.MessageType.Error)

    def publish(self, uri: str) -> None:
        state = self.states.get(uri)
        if state is None or state.linted is None:
            return
        linted = state.linted
        if isinstance(linted, NotebookLinted):
            self._publish_cells(state, linted)
            return
        found = self.shown(uri, linted)
        doc = self.document(uri)
        self.text_document_publish_diagnostics(
            types.PublishDiagnosticsParams(
                uri=uri,
                version=doc.version if doc is not None else None,
                diagnostics=[to_lsp(d, linted.text) for d in found],
            )
        )

    def _publish_cells(self, state: DocumentState, linted: NotebookLinted) -> None:
        """Each code cell's diagnostics (an empty list too), unless the cell already shows them
        for its version; cells no longer linted are cleared. Shape findings of the notebook's
        text as it is join the cells they name."""
        published: dict[str, tuple[int | None, list[types.Diagnostic]]] = {}
        shaped = state.shape_diagnostics if state.shape_source == linted.text.source else []
        for cell in linted.cells.values():
            found = self.shown(cell.uri, cell)
            found += [d for d in shaped if d.cell == linted.numbers[cell.index]]
            shown = (cell.version, [to_lsp(d, cell.text) for d in found])
            published[cell.uri] = shown
            if state.published.get(cell.uri) == shown:
                continue
            self.text_document_publish_diagnostics(
                types.PublishDiagnosticsParams(
                    uri=cell.uri, version=cell.version, diagnostics=shown[1]
                )
            )
        self.clear(state.published.keys() - published.keys())
        state.published = published

    def clear(self, uris: Iterable[str]) -> None:
        for uri in sorted(uris):
            self.text_document_publish_diagnostics(
                types.PublishDiagnosticsParams(uri=uri, diagnostics=[])
            )

    def shown(self, uri: str, linted: Linted) -> list[Diagnostic]:
        """What the editor shows for this lint: its findings, and shape findings for its text."""
        found = [d for d in linted.diagnostics if d.code != INTERNAL_ERROR]
        state = self.states.get(uri)
        if state is not None and state.shape_source == linted.text.source:
            found += state.shape_diagnostics
        return found

    async def fresh(self, uri: str) -> Linted | None:
        """The lint of the document's current text, linting now if the last one is stale."""
        notebook = self.workspace.get_notebook_document(cell_uri=uri)
        if notebook is not None:
            return await self._fresh_cell(uri, notebook)
        doc = self.document(uri)
        state = self.states.get(uri)
        if doc is None or state is None:
            return None
        if state.linted is not None and state.linted.text.source == doc.source:
            return state.linted
        # A pending debounced lint still runs (it may start shape checks); this one answers now.
        return await self.lint_now(uri)

    async def _fresh_cell(self, uri: str, notebook: types.NotebookDocument) -> Linted | None:
        """A cell's share of the lint of its notebook as it is now (all cells count)."""
        state = self.states.get(notebook.uri)
        if state is None:
            return None
        linted = state.linted
        now = tuple((cell.uri, cell.source) for cell in self.code_cells(notebook))
        if not isinstance(linted, NotebookLinted) or linted.snapshot != now:
            linted = await self.lint_now(notebook.uri)
        if not isinstance(linted, NotebookLinted):
            return None
        return linted.cells.get(unquote(uri))

    # --- shape checks --------------------------------------------------------------------------

    def start_shapes(self, uri: str, linted: Linted) -> None:
        state = self.states.get(uri)
        if (
            state is None
            or not self.options.runs_shapes
            or self.shapes.available is False
            or not linted.settings.wants_shapes
            or not may_hold_model(linted.text.source)
            or not shapes_installed()
        ):
            return
        self.cancel_shapes(state)
        state.shape_task = asyncio.ensure_future(self._run_shapes(uri, linted))

    async def _run_shapes(self, uri: str, linted: Linted) -> None:
        try:
            result = await self.shapes.check_with_tables(
                linted.display, linted.text.source, linted.settings.declared_shapes
            )
        except asyncio.CancelledError:
            raise
        except Exception:
            self.log_error(f"shape checks failed on {uri}")
            return
        state = self.states.get(uri)
        if result is None or state is None or state.linted is None:
            return
        source = linted.text.source
        if state.linted.text.source != source:
            return  # edited since: these positions are stale
        kept = [d for d in result.diagnostics if d.code in linted.settings.enabled]
        state.shape_diagnostics = apply_suppressions(source, kept)
        state.shape_source = source
        tables = result.tables
        if isinstance(linted, NotebookLinted):
            # Found in the joined cells: each goes to its cell, in the cell's coordinates. The
            # tables' lines are the joined text's: no inlay hints in cells.
            sources = next(iter(linted.cells.values())).sources if linted.cells else ()
            joined = notebook_from_cells(list(sources), linted.numbers)
            state.shape_diagnostics = [
                to_cell_diagnostic(joined, d) for d in state.shape_diagnostics
            ]
            tables = []
        had_tables, state.shape_tables = bool(state.shape_tables), tables
        self.publish(uri)
        if tables or had_tables:
            self.refresh_inlay_hints()

    def refresh_inlay_hints(self) -> None:
        """Ask the client to request inlay hints again (new shape tables), if it can."""
        workspace = self.client_capabilities.workspace
        inlay = workspace.inlay_hint if workspace else None
        if inlay is not None and inlay.refresh_support:
            try:
                self.workspace_inlay_hint_refresh(None)
            except Exception:
                self.log_error("cannot refresh inlay hints")

    @staticmethod
    def cancel_shapes(state: DocumentState) -> None:
        if state.shape_task is not None and not state.shape_task.done():
            state.shape_task.cancel()
        state.shape_task = None

    # --- document events -----------------------------------------------------------------------

    def opened(self, uri: str) -> None:
        self.schedule(uri, shapes=True)

    def changed(self, uri: str) -> None:
        state = self.states.get(uri)
        if state is not None:
            self.cancel_shapes(state)
        self.schedule(uri, self.options.debounce_ms / 1000)

    def saved(self, uri: str) -> None:
        if Path(to_fs_path(uri) or uri).name in CONFIG_FILE_NAMES:
            self.reconfigure()
        elif uri in self.states:
            self.schedule(uri, shapes=True)

    def closed(self, uri: str) -> None:
        self._forget(uri)
        self.clear([uri])

    def notebook_changed(self, uri: str, closed: Iterable[str]) -> None:
        """A notebook changed; the cells it `closed` (removed) are cleared right away."""
        state = self.states.get(uri)
        if state is not None:
            gone = [cell for cell in closed if state.published.pop(cell, None) is not None]
            self.clear(gone)
        self.changed(uri)

    def notebook_closed(self, uri: str, cells: Iterable[str]) -> None:
        """A notebook closed: clear its cells (those it closed with, and those last shown)."""
        state = self._forget(uri)
        self.clear(set(cells) | (state.published.keys() if state is not None else set()))

    def _forget(self, uri: str) -> DocumentState | None:
        state = self.states.pop(uri, None)
        if state is not None:
            if state.lint_task is not None:
                state.lint_task.cancel()
            self.cancel_shapes(state)
        return state

    def reconfigure(self) -> None:
        """A configuration file changed: forget what was read and lint every open document."""
        forget_configuration()
        self._announced.clear()
        for uri in list(self.states):
            self.schedule(uri, shapes=True)

    def watch_configuration(self) -> None:
        """Ask the client to report configuration-file changes, when it can register watchers."""
        workspace = self.client_capabilities.workspace
        watched = workspace.did_change_watched_files if workspace else None
        if not (watched and watched.dynamic_registration):
            return
        options = types.DidChangeWatchedFilesRegistrationOptions(
            watchers=[types.FileSystemWatcher(glob_pattern=f"**/{n}") for n in CONFIG_FILE_NAMES]
        )
        self.client_register_capability(
            types.RegistrationParams(
                registrations=[
                    types.Registration(
                        id="torchlint-configuration",
                        method=types.WORKSPACE_DID_CHANGE_WATCHED_FILES,
                        register_options=options,
                    )
                ]
            )
        )

    def stop(self) -> None:
        self.shapes.close()
        self.linter.shutdown(wait=False, cancel_futures=True)
