"""The LSP methods the server answers, wired to `TorchlintServer`, and the stdio entry point."""

from __future__ import annotations

import logging
import os
import sys
from pathlib import PurePosixPath

from lsprotocol import types

from torchlint.server import inlay, requests
from torchlint.server.app import TorchlintServer
from torchlint.server.settings import CONFIG_FILE_NAMES, Options


def create_server() -> TorchlintServer:
    """A server with every handler registered."""
    server = TorchlintServer()

    @server.feature(types.INITIALIZE)
    def initialize(ls: TorchlintServer, params: types.InitializeParams) -> None:
        ls.options = Options.parse(params.initialization_options)

    @server.feature(types.INITIALIZED)
    def initialized(ls: TorchlintServer, params: types.InitializedParams) -> None:
        try:
            ls.watch_configuration()
        except Exception:
            ls.log_error("cannot watch configuration files")

    @server.feature(types.TEXT_DOCUMENT_DID_OPEN)
    def did_open(ls: TorchlintServer, params: types.DidOpenTextDocumentParams) -> None:
        ls.opened(params.text_document.uri)

    @server.feature(types.TEXT_DOCUMENT_DID_CHANGE)
    def did_change(ls: TorchlintServer, params: types.DidChangeTextDocumentParams) -> None:
        ls.changed(params.text_document.uri)

    @server.feature(types.TEXT_DOCUMENT_DID_SAVE)
    def did_save(ls: TorchlintServer, params: types.DidSaveTextDocumentParams) -> None:
        ls.saved(params.text_document.uri)

    @server.feature(types.TEXT_DOCUMENT_DID_CLOSE)
    def did_close(ls: TorchlintServer, params: types.DidCloseTextDocumentParams) -> None:
        ls.closed(params.text_document.uri)

    # Notebooks: pygls keeps the notebook and its cell documents; lint the whole notebook.
    @server.feature(types.NOTEBOOK_DOCUMENT_DID_OPEN)
    def notebook_did_open(ls: TorchlintServer, params: types.DidOpenNotebookDocumentParams) -> None:
        ls.opened(params.notebook_document.uri)

    @server.feature(types.NOTEBOOK_DOCUMENT_DID_CHANGE)
    def notebook_did_change(
        ls: TorchlintServer, params: types.DidChangeNotebookDocumentParams
    ) -> None:
        structure = params.change.cells.structure if params.change.cells else None
        closed = (structure.did_close or []) if structure else []
        ls.notebook_changed(params.notebook_document.uri, [cell.uri for cell in closed])

    @server.feature(types.NOTEBOOK_DOCUMENT_DID_SAVE)
    def notebook_did_save(ls: TorchlintServer, params: types.DidSaveNotebookDocumentParams) -> None:
        ls.saved(params.notebook_document.uri)

    @server.feature(types.NOTEBOOK_DOCUMENT_DID_CLOSE)
    def notebook_did_close(
        ls: TorchlintServer, params: types.DidCloseNotebookDocumentParams
    ) -> None:
        ls.notebook_closed(
            params.notebook_document.uri, [cell.uri for cell in params.cell_text_documents]
        )

    @server.feature(types.WORKSPACE_DID_CHANGE_WATCHED_FILES)
    def did_change_watched_files(
        ls: TorchlintServer, params: types.DidChangeWatchedFilesParams
    ) -> None:
        if any(PurePosixPath(c.uri).name in CONFIG_FILE_NAMES for c in params.changes):
            ls.reconfigure()

    @server.feature(
        types.TEXT_DOCUMENT_CODE_ACTION,
        types.CodeActionOptions(code_action_kinds=requests.CODE_ACTION_KINDS),
    )
    async def code_action(
        ls: TorchlintServer, params: types.CodeActionParams
    ) -> list[types.CodeAction]:
        ls.require_open(params.text_document.uri)
        try:
            return await requests.code_actions(ls, params)
        except Exception:
            ls.log_error(f"code actions failed on {params.text_document.uri}")
            return []

    @server.feature(types.TEXT_DOCUMENT_HOVER)
    async def hover(ls: TorchlintServer, params: types.HoverParams) -> types.Hover | None:
        ls.require_open(params.text_document.uri)
        try:
            return await requests.hover(ls, params)
        except Exception:
            ls.log_error(f"hover failed on {params.text_document.uri}")
            return None

    @server.feature(types.TEXT_DOCUMENT_INLAY_HINT, types.InlayHintOptions(resolve_provider=False))
    async def inlay_hint(
        ls: TorchlintServer, params: types.InlayHintParams
    ) -> list[types.InlayHint]:
        ls.require_open(params.text_document.uri)
        try:
            return await inlay.inlay_hints(ls, params)
        except Exception:
            ls.log_error(f"inlay hints failed on {params.text_document.uri}")
            return []

    @server.feature(types.SHUTDOWN)
    def shutdown(ls: TorchlintServer, params: None) -> None:
        ls.stop()

    return server


def serve() -> int:
    """Run the server on stdio until the client says exit (or goes away)."""
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    # The protocol owns stdout; a stray print() anywhere (a rule, a library) must not corrupt it.
    channel = os.fdopen(os.dup(sys.stdout.fileno()), "wb")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    sys.stdout = sys.stderr
    server = create_server()
    try:
        server.start_io(sys.stdin.buffer, channel)
    finally:
        server.stop()
    return 0
