"""The language server driven by a real LSP client (pytest-lsp), as Neovim and as VS Code.

Each client's recorded capabilities are replayed in `initialize`, so the server is exercised
with what those editors actually announce (position encodings, versioned edits, ...).
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest

pytest_lsp = pytest.importorskip("pytest_lsp", reason="pytest-lsp is not installed")
from lsprotocol import types  # noqa: E402
from pygls.workspace import PositionCodec, TextDocument  # noqa: E402
from pytest_lsp import (  # noqa: E402
    ClientServerConfig,
    LanguageClient,
    client_capabilities,
    make_test_lsp_client,
)

from torchlint.registry import all_rules  # noqa: E402
from torchlint.server import DOCS_URL  # noqa: E402

SUPPORT = Path(__file__).resolve().parent / "test_server_support.py"
CLIENTS = ["neovim", "visual_studio_code"]
TIMEOUT = 20.0

pytestmark = pytest.mark.asyncio(loop_scope="module")

BUGGY = """\
import torch
import torch.nn.functional as F


def step(logits, y):
    probs = F.softmax(logits, dim=1)  # ünïcode 🔥 comment
    return probs.sum()
"""


def make_client() -> LanguageClient:
    """pytest-lsp's client, also answering `client/registerCapability` as editors do."""
    client = make_test_lsp_client()
    client.registrations = []  # type: ignore[attr-defined]

    @client.feature(types.CLIENT_REGISTER_CAPABILITY)
    def register(ls: LanguageClient, params: types.RegistrationParams) -> None:
        ls.registrations.extend(params.registrations)  # type: ignore[attr-defined]

    return client


@pytest_lsp.fixture(
    scope="module",
    params=CLIENTS,
    config=ClientServerConfig(
        server_command=[sys.executable, str(SUPPORT)], client_factory=make_client
    ),
)
async def client(request: pytest.FixtureRequest, lsp_client: LanguageClient):
    root = request.getfixturevalue("workspace")
    await lsp_client.initialize_session(
        types.InitializeParams(
            capabilities=client_capabilities(request.param),
            root_uri=root.as_uri(),
            workspace_folders=[types.WorkspaceFolder(uri=root.as_uri(), name="ws")],
            initialization_options={"debounceMs": 10, "shapes": False},
        )
    )
    yield
    await lsp_client.shutdown_session()


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("ws")


# --- helpers -----------------------------------------------------------------------------------


class Doc:
    """A document the test client has open: its text, version and URI."""

    def __init__(self, client: LanguageClient, path: Path, text: str) -> None:
        self.client, self.path, self.text, self.version = client, path, text, 1
        self.uri = path.as_uri()
        path.write_text(text)
        client.text_document_did_open(
            types.DidOpenTextDocumentParams(
                text_document=types.TextDocumentItem(
                    uri=self.uri, language_id="python", version=self.version, text=text
                )
            )
        )

    @property
    def encoding(self) -> str:
        caps = self.client.capabilities
        offered = caps.general.position_encodings if caps and caps.general else None
        return str(offered[0]) if offered else "utf-16"

    def apply(self, edits: Sequence[types.TextEdit]) -> None:
        """Apply edits as a client would (pygls' own text model), then send the new text."""
        doc = TextDocument(self.uri, self.text, position_codec=PositionCodec(self.encoding))
        for edit in sorted(edits, key=lambda e: (e.range.start.line, e.range.start.character))[
            ::-1
        ]:
            doc.apply_change(
                types.TextDocumentContentChangePartial(range=edit.range, text=edit.new_text)
            )
        self.replace(doc.source)

    def replace(self, text: str) -> None:
        self.text = text
        self.version += 1
        self.client.text_document_did_change(
            types.DidChangeTextDocumentParams(
                text_document=types.VersionedTextDocumentIdentifier(
                    uri=self.uri, version=self.version
                ),
                content_changes=[types.TextDocumentContentChangeWholeDocument(text=text)],
            )
        )

    def close(self) -> None:
        self.client.text_document_did_close(
            types.DidCloseTextDocumentParams(
                text_document=types.TextDocumentIdentifier(uri=self.uri)
            )
        )

    async def diagnostics(
        self, until: Callable[[list[types.Diagnostic]], bool]
    ) -> list[types.Diagnostic]:
        """Wait until the published diagnostics satisfy `until`."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + TIMEOUT
        while True:
            found = list(self.client.diagnostics.get(self.uri, []))
            if self.uri in self.client.diagnostics and until(found):
                return found
            if loop.time() > deadline:
                raise AssertionError(f"diagnostics never matched; last: {found}")
            await asyncio.sleep(0.02)

    async def actions(self, diagnostic: types.Diagnostic) -> list[types.CodeAction]:
        result = await self.client.text_document_code_action_async(
            types.CodeActionParams(
                text_document=types.TextDocumentIdentifier(uri=self.uri),
                range=diagnostic.range,
                context=types.CodeActionContext(diagnostics=[diagnostic]),
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


def edits_of(action: types.CodeAction) -> list[types.TextEdit]:
    assert action.edit is not None
    if action.edit.document_changes:
        change = action.edit.document_changes[0]
        assert isinstance(change, types.TextDocumentEdit)
        return [e for e in change.edits if isinstance(e, types.TextEdit)]
    assert action.edit.changes is not None
    return list(next(iter(action.edit.changes.values())))


def utf_units(text: str, encoding: str) -> int:
    if encoding == "utf-8":
        return len(text.encode())
    if encoding == "utf-32":
        return len(text)
    return len(text.encode("utf-16-le")) // 2


# --- tests -------------------------------------------------------------------------------------


async def test_diagnostics_on_open_have_code_range_and_docs_link(
    client: LanguageClient, workspace: Path
) -> None:
    doc = Doc(client, workspace / "open.py", BUGGY)
    found = await doc.diagnostics(lambda ds: "TL9901" in codes(ds))
    (d,) = [d for d in found if d.code == "TL9901"]
    assert d.source == "torchlint"
    assert d.severity == types.DiagnosticSeverity.Error
    assert d.code_description is not None
    assert d.code_description.href == f"{DOCS_URL}#tl9901-fake-softmax"
    line = BUGGY.splitlines()[5]
    column = line.index("F.softmax")
    assert d.range == types.Range(
        types.Position(5, column), types.Position(5, column + len("F.softmax"))
    )
    doc.close()


async def test_ranges_count_in_the_negotiated_encoding(
    client: LanguageClient, workspace: Path
) -> None:
    # A non-ASCII prefix shifts columns differently in UTF-8, UTF-16 and UTF-32.
    source = "import torch\nimport torch.nn.functional as F\nx = ('🔥é', F.softmax(t))\n"
    doc = Doc(client, workspace / "unicode.py", source)
    (d,) = await doc.diagnostics(lambda ds: "TL9901" in codes(ds))
    prefix = source.splitlines()[2].split("F.softmax")[0]
    start = utf_units(prefix, doc.encoding)
    assert d.range.start == types.Position(2, start)
    assert d.range.end == types.Position(2, start + len("F.softmax"))
    doc.close()


async def test_edits_update_diagnostics_and_close_clears_them(
    client: LanguageClient, workspace: Path
) -> None:
    doc = Doc(client, workspace / "edit.py", BUGGY)
    await doc.diagnostics(lambda ds: codes(ds) == ["TL9901"])
    doc.replace(BUGGY.replace("probs = F.softmax", "probs = F.softmax(logits, 1) + F.softmax"))
    await doc.diagnostics(lambda ds: codes(ds) == ["TL9901", "TL9901"])
    doc.replace(BUGGY.replace("F.softmax", "F.log_softmax"))
    await doc.diagnostics(lambda ds: ds == [])
    doc.replace(BUGGY)
    await doc.diagnostics(lambda ds: codes(ds) == ["TL9901"])
    doc.close()
    await doc.diagnostics(lambda ds: ds == [])


async def test_unsaved_buffers_without_a_file(client: LanguageClient) -> None:
    uri = "untitled:Untitled-1"
    client.text_document_did_open(
        types.DidOpenTextDocumentParams(
            text_document=types.TextDocumentItem(
                uri=uri, language_id="python", version=1, text=BUGGY
            )
        )
    )
    await wait_for(lambda: "TL9901" in codes(list(client.diagnostics.get(uri, []))))
    client.text_document_did_close(
        types.DidCloseTextDocumentParams(text_document=types.TextDocumentIdentifier(uri=uri))
    )
    await wait_for(lambda: list(client.diagnostics.get(uri, [None])) == [])


async def test_syntax_error_is_reported_and_the_server_keeps_serving(
    client: LanguageClient, workspace: Path
) -> None:
    broken = "import torch\n\ndef forward(self, x)\n    return x\n"
    doc = Doc(client, workspace / "broken.py", broken)
    (d,) = await doc.diagnostics(lambda ds: codes(ds) == ["TL000"])
    assert d.range.start.line == 2
    assert "SyntaxError" in d.message
    doc.replace(broken.replace("x)\n", "x):\n"))
    await doc.diagnostics(lambda ds: ds == [])
    for garbage in ["\x00\x01", "(" * 500, "def f(:\n\t\t  ]", ""]:
        doc.replace(f"import torch\n{garbage}")
        await asyncio.sleep(0.05)
    doc.replace(BUGGY)
    await doc.diagnostics(lambda ds: codes(ds) == ["TL9901"])
    doc.close()


async def test_rule_crash_is_logged_and_other_rules_still_report(
    client: LanguageClient, workspace: Path
) -> None:
    doc = Doc(client, workspace / "crash.py", BUGGY + "boom()\n")
    found = await doc.diagnostics(lambda ds: "TL9901" in codes(ds))
    assert codes(found) == ["TL9901"]  # the crash is logged, not shown as a finding

    await wait_for(lambda: any("TL9902" in m.message for m in client.log_messages))
    message = next(m for m in client.log_messages if "TL9902" in m.message)
    assert message.type == types.MessageType.Error
    assert "fake rule failure" in message.message
    doc.close()


async def test_disable_for_this_line_adds_then_extends_noqa(
    client: LanguageClient, workspace: Path
) -> None:
    doc = Doc(client, workspace / "noqa.py", BUGGY)
    (d,) = await doc.diagnostics(lambda ds: codes(ds) == ["TL9901"])
    actions = await doc.actions(d)
    titles = [a.title for a in actions]
    assert "Disable TL9901 for this line" in titles
    disable = next(a for a in actions if a.title == "Disable TL9901 for this line")
    assert disable.kind == types.CodeActionKind.QuickFix
    doc.apply(edits_of(disable))
    assert doc.text.splitlines()[5].endswith("comment  # noqa: TL9901")
    await doc.diagnostics(lambda ds: ds == [])
    # An existing noqa list is extended rather than duplicated.
    doc.replace(BUGGY.replace("comment\n", "comment  # noqa: TL101\n"))
    (d,) = await doc.diagnostics(lambda ds: codes(ds) == ["TL9901"])
    disable = next(a for a in await doc.actions(d) if a.title.startswith("Disable"))
    doc.apply(edits_of(disable))
    assert doc.text.splitlines()[5].endswith("# noqa: TL101, TL9901")
    await doc.diagnostics(lambda ds: ds == [])
    doc.close()


async def test_fix_action_and_fix_all(client: LanguageClient, workspace: Path) -> None:
    source = BUGGY.replace("return probs.sum()", "return F.softmax(probs, 0).sum()")
    doc = Doc(client, workspace / "fix.py", source)
    found = await doc.diagnostics(lambda ds: codes(ds) == ["TL9901", "TL9901"])
    fix = next(a for a in await doc.actions(found[0]) if a.title.startswith("Fix: "))
    assert fix.title == "Fix: use F.log_softmax"
    assert fix.is_preferred
    doc.apply(edits_of(fix))
    await doc.diagnostics(lambda ds: codes(ds) == ["TL9901"])

    doc.replace(source)
    await doc.diagnostics(lambda ds: codes(ds) == ["TL9901", "TL9901"])
    result = await client.text_document_code_action_async(
        types.CodeActionParams(
            text_document=types.TextDocumentIdentifier(uri=doc.uri),
            range=types.Range(
                start=types.Position(line=0, character=0),
                end=types.Position(line=0, character=0),
            ),
            context=types.CodeActionContext(
                diagnostics=[], only=[types.CodeActionKind.SourceFixAll]
            ),
        )
    )
    (fix_all,) = result or []
    assert isinstance(fix_all, types.CodeAction)
    assert fix_all.kind == "source.fixAll.torchlint"
    doc.apply(edits_of(fix_all))
    assert doc.text == source.replace("F.softmax", "F.log_softmax")
    await doc.diagnostics(lambda ds: ds == [])
    doc.close()


async def test_hover_shows_rule_documentation(client: LanguageClient, workspace: Path) -> None:
    doc = Doc(client, workspace / "hover.py", BUGGY + "x = 1  # noqa: TL000, TL9901\n")
    (d,) = await doc.diagnostics(lambda ds: codes(ds) == ["TL9901"])
    hover = await client.text_document_hover_async(
        types.HoverParams(
            text_document=types.TextDocumentIdentifier(uri=doc.uri), position=d.range.start
        )
    )
    assert hover is not None and isinstance(hover.contents, types.MarkupContent)
    assert hover.contents.kind == types.MarkupKind.Markdown
    assert hover.contents.value.startswith("# fake-softmax (TL9901)")
    assert "## Why is this bad?" in hover.contents.value
    assert hover.range == d.range
    # On a code inside a noqa comment.
    line = doc.text.splitlines()[7]
    hover = await client.text_document_hover_async(
        types.HoverParams(
            text_document=types.TextDocumentIdentifier(uri=doc.uri),
            position=types.Position(line=7, character=line.index("TL000") + 2),
        )
    )
    assert hover is not None and isinstance(hover.contents, types.MarkupContent)
    assert hover.contents.value.startswith("# syntax-error (TL000)")
    # Nowhere in particular: nothing.
    hover = await client.text_document_hover_async(
        types.HoverParams(
            text_document=types.TextDocumentIdentifier(uri=doc.uri),
            position=types.Position(line=0, character=1),
        )
    )
    assert hover is None
    doc.close()


async def test_configuration_is_read_and_reread(client: LanguageClient, workspace: Path) -> None:
    pytest.importorskip("torchlint.config", reason="torchlint.config is not there yet")
    dynamic = client.capabilities.workspace.did_change_watched_files.dynamic_registration
    if dynamic:  # VS Code: the server asks to be told about configuration files
        await wait_for(lambda: client.registrations)  # type: ignore[attr-defined]
        (registration,) = client.registrations  # type: ignore[attr-defined]
        assert registration.method == types.WORKSPACE_DID_CHANGE_WATCHED_FILES
        assert "**/pyproject.toml" in str(registration.register_options)
    project = workspace / "project"
    project.mkdir(exist_ok=True)
    config = project / "pyproject.toml"
    config.write_text('[tool.torchlint]\nignore = ["TL9901"]\n')
    doc = Doc(client, project / "configured.py", BUGGY)
    await doc.diagnostics(lambda ds: ds == [])
    config.write_text("[tool.torchlint]\n")
    client.workspace_did_change_watched_files(
        types.DidChangeWatchedFilesParams(
            changes=[types.FileEvent(uri=config.as_uri(), type=types.FileChangeType.Changed)]
        )
    )
    await doc.diagnostics(lambda ds: codes(ds) == ["TL9901"])
    doc.close()

    # Excluded paths get no diagnostics.
    config.write_text('[tool.torchlint]\nextend-exclude = ["generated"]\n')
    await asyncio.sleep(0.05)  # a different modification time, even on coarse file systems
    (project / "generated").mkdir(exist_ok=True)
    excluded = Doc(client, project / "generated" / "made.py", BUGGY)
    await excluded.diagnostics(lambda ds: ds == [])
    excluded.close()

    # An invalid configuration is shown once; the defaults apply until it is fixed.
    config.write_text('[tool.torchlint]\nselect = ["NOPE999"]\n')
    doc = Doc(client, project / "configured.py", BUGGY)
    await doc.diagnostics(lambda ds: codes(ds) == ["TL9901"])
    await wait_for(lambda: any("NOPE999" in m.message for m in client.messages))
    doc.close()
    config.unlink()


@pytest.mark.skipif("TL101" not in all_rules(), reason="rule TL101 is not committed yet")
async def test_tl101_softmax_into_cross_entropy(client: LanguageClient, workspace: Path) -> None:
    source = (
        "import torch\nimport torch.nn.functional as F\n\n\n"
        "def step(logits, y):\n"
        "    loss = F.cross_entropy(F.softmax(logits, dim=1), y)\n"
        "    return loss\n"
    )
    doc = Doc(client, workspace / "tl101.py", source)
    found = await doc.diagnostics(lambda ds: "TL101" in codes(ds))
    (d,) = [d for d in found if d.code == "TL101"]
    assert d.range.start.line == 5
    assert d.code_description is not None
    assert d.code_description.href.endswith("rules.md#tl101-softmax-before-cross-entropy")
    doc.close()
