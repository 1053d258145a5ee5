"""Hostile model files opened in the language server: the same sandbox as on the CLI.

The real server and shape engine run here (unlike test_server_shapes.py), on files from
`fixtures/hostile/`: opening them must leave no marker file, make no connection and leave no
process behind, and the neighbouring file's finding must still be published.
"""

from __future__ import annotations

import asyncio
import sys
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest

pytest.importorskip("torch", reason="shape checks (TL6xx) need torch installed")
pytest_lsp = pytest.importorskip("pytest_lsp", reason="pytest-lsp is not installed")
from lsprotocol import types  # noqa: E402
from pytest_lsp import ClientServerConfig, LanguageClient, client_capabilities  # noqa: E402

from tests.test_server_lsp import codes  # noqa: E402
from tests.test_shapes_sandbox import Listener, copy_corpus, tagged_processes  # noqa: E402

pytestmark = pytest.mark.asyncio(loop_scope="module")

TAG = uuid.uuid4().hex
#: Each opened file starts a shape worker, which imports torch: slow on a busy machine.
WAIT = 240.0


@pytest.fixture(scope="module")
def listener():
    server = Listener()
    yield server
    server.close()


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory, listener: Listener) -> Path:
    root = tmp_path_factory.mktemp("hostile")
    marker = root / "markers"
    marker.mkdir()
    (marker / "keep").write_text("must survive")
    project = root / "project"
    copy_corpus(project, marker, listener.port)
    (project / "pyproject.toml").write_text('[tool.torchlint]\nextend-select = ["TL690"]\n')
    return root


@pytest_lsp.fixture(
    scope="module",
    config=ClientServerConfig(
        server_command=[sys.executable, "-m", "torchlint", "server"],
        server_env={"TORCHLINT_SHAPES_TIMEOUT": "10", "TORCHLINT_TEST_TAG": TAG},
    ),
)
async def client(request: pytest.FixtureRequest, lsp_client: LanguageClient):
    root = request.getfixturevalue("workspace") / "project"

    @lsp_client.feature(types.WORKSPACE_INLAY_HINT_REFRESH)
    def refresh(ls: LanguageClient, params: None) -> None:
        return None

    await lsp_client.initialize_session(
        types.InitializeParams(
            capabilities=client_capabilities("neovim"),
            root_uri=root.as_uri(),
            initialization_options={"debounceMs": 10, "trusted": True},
        )
    )
    yield
    await lsp_client.shutdown_session()


async def opened(
    client: LanguageClient, path: Path, until: Callable[[list[types.Diagnostic]], bool]
) -> list[types.Diagnostic]:
    uri = path.as_uri()
    client.text_document_did_open(
        types.DidOpenTextDocumentParams(
            text_document=types.TextDocumentItem(
                uri=uri, language_id="python", version=1, text=path.read_text()
            )
        )
    )
    loop = asyncio.get_running_loop()
    deadline = loop.time() + WAIT
    while True:
        found = list(client.diagnostics.get(uri, []))
        if until(found):
            return found
        if loop.time() > deadline:
            raise AssertionError(f"diagnostics never matched; last: {found}")
        await asyncio.sleep(0.1)


async def test_hostile_files_in_the_editor(
    client: LanguageClient, workspace: Path, listener: Listener
) -> None:
    project = workspace / "project"
    found = await opened(client, project / "constructor.py", lambda ds: len(ds) >= 7)
    messages = " ".join(d.message for d in found)
    assert codes(found) == ["TL690"] * 7
    assert "Blocked: the model's code runs a subprocess" in messages
    assert "Blocked: the model's code opens a network connection" in messages
    found = await opened(client, project / "exits_on_load.py", lambda ds: bool(ds))
    assert "the check stopped the worker" in found[0].message
    found = await opened(client, project / "spins.py", lambda ds: bool(ds))
    assert "timed out after 10 s" in found[0].message
    found = await opened(client, project / "neighbour.py", lambda ds: bool(ds))
    assert codes(found) == ["TL601"], [d.message for d in found]
    assert sorted(p.name for p in (workspace / "markers").iterdir()) == ["keep"]
    assert listener.connections == 0
    # Only the server and its own shape worker (which stays up between checks) remain.
    assert len(tagged_processes(TAG)) <= 2
