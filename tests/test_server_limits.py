"""The language server against hostile input: oversized documents, invalid request parameters."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import pytest

pytest_lsp = pytest.importorskip("pytest_lsp", reason="pytest-lsp is not installed")
from lsprotocol import types  # noqa: E402
from pygls.exceptions import JsonRpcException  # noqa: E402
from pytest_lsp import ClientServerConfig, LanguageClient, client_capabilities  # noqa: E402

from tests.test_server_lsp import BUGGY, TIMEOUT, Doc, codes, make_client  # noqa: E402

SUPPORT = Path(__file__).resolve().parent / "test_server_support.py"

pytestmark = pytest.mark.asyncio(loop_scope="module")


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("limits")
    (root / "pyproject.toml").write_text("[tool.torchlint]\nmax-file-size-kb = 64\n")
    return root


@pytest_lsp.fixture(
    scope="module",
    config=ClientServerConfig(
        server_command=[sys.executable, str(SUPPORT)], client_factory=make_client
    ),
)
async def client(request: pytest.FixtureRequest, lsp_client: LanguageClient):
    root = request.getfixturevalue("workspace")
    await lsp_client.initialize_session(
        types.InitializeParams(
            capabilities=client_capabilities("neovim"),
            root_uri=root.as_uri(),
            workspace_folders=[types.WorkspaceFolder(uri=root.as_uri(), name="ws")],
            initialization_options={"debounceMs": 10, "shapes": False},
        )
    )
    yield
    await lsp_client.shutdown_session()


async def test_an_oversized_document_is_not_analysed_and_says_why(
    client: LanguageClient, workspace: Path
) -> None:
    doc = Doc(client, workspace / "huge.py", BUGGY + "x = 1\n" * 20_000)
    (d,) = await doc.diagnostics(lambda ds: len(ds) == 1)
    assert d.code == "TL000" and "over max-file-size-kb (64)" in d.message
    assert d.range.start == types.Position(0, 0)
    doc.replace(BUGGY)  # back under the limit: analysed again
    await doc.diagnostics(lambda ds: codes(ds) == ["TL9901"])
    doc.close()


async def test_hostile_nesting_is_reported_and_the_server_keeps_serving(
    client: LanguageClient, workspace: Path
) -> None:
    doc = Doc(client, workspace / "nested.py", BUGGY + "x = " + "(" * 5000 + "1" + ")" * 5000)
    (d,) = await doc.diagnostics(lambda ds: codes(ds) == ["TL000"])
    assert "too deeply nested to analyse" in d.message
    doc.replace(BUGGY + "x = " + " + ".join(["a"] * 10_000) + "\n")  # under the 64 KB limit
    (d,) = await doc.diagnostics(lambda ds: codes(ds) == ["TL000"] and "long" in ds[0].message)
    assert "expression too long to analyse" in d.message
    doc.replace(BUGGY)
    await doc.diagnostics(lambda ds: codes(ds) == ["TL9901"])
    doc.close()


def _position(line: int, character: int) -> types.Position:
    """A position as a client may send it: lsprotocol would refuse to build a negative one."""
    position = types.Position(0, 0)
    object.__setattr__(position, "line", line)
    object.__setattr__(position, "character", character)
    return position


def _action_params(uri: str, line: int, character: int) -> types.CodeActionParams:
    position = _position(line, character)
    return types.CodeActionParams(
        text_document=types.TextDocumentIdentifier(uri=uri),
        range=types.Range(position, position),
        context=types.CodeActionContext(diagnostics=[]),
    )


async def test_invalid_positions_and_unknown_documents_get_an_error_response(
    client: LanguageClient, workspace: Path
) -> None:
    doc = Doc(client, workspace / "positions.py", BUGGY)
    await doc.diagnostics(lambda ds: codes(ds) == ["TL9901"])
    bad = [
        _action_params(doc.uri, -1, 0),
        _action_params(doc.uri, 0, -5),
        _action_params((workspace / "never-opened.py").as_uri(), 0, 0),
    ]
    reasons = []
    for params in bad:
        with pytest.raises(JsonRpcException) as raised:
            await asyncio.wait_for(client.text_document_code_action_async(params), TIMEOUT)
        reasons.append(str(raised.value))
    assert "Position.line should be in range" in reasons[0]
    assert "Position.character should be in range" in reasons[1]
    assert "document not open" in reasons[2]
    with pytest.raises(JsonRpcException):
        await asyncio.wait_for(
            client.text_document_hover_async(
                types.HoverParams(
                    text_document=types.TextDocumentIdentifier(uri=doc.uri),
                    position=_position(-3, -3),
                )
            ),
            TIMEOUT,
        )
    # Positions past the end are clamped, as LSP asks, and the server still serves.
    (d,) = client.diagnostics[doc.uri]
    far = await client.text_document_code_action_async(_action_params(doc.uri, 99, 99))
    assert [a.kind for a in far or []] == ["source.fixAll.torchlint"]
    assert any(a.title.startswith("Fix:") for a in await doc.actions(d))
    doc.close()
