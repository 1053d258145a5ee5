"""Shape checks in the language server: background, on open and save, cancelled by edits.

A stand-in shape engine (`fake_check_files` in test_server_support.py) runs in the worker
process instead of the real one, so these tests need neither torch nor `torchlint.shapes`.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import pytest

pytest_lsp = pytest.importorskip("pytest_lsp", reason="pytest-lsp is not installed")
from lsprotocol import types  # noqa: E402
from pytest_lsp import ClientServerConfig, LanguageClient, client_capabilities  # noqa: E402

from tests.test_server_lsp import Doc, codes  # noqa: E402

SUPPORT = Path(__file__).resolve().parent / "test_server_support.py"

pytestmark = pytest.mark.asyncio(loop_scope="module")

SOURCE = """\
import torch
import torch.nn as nn
import torch.nn.functional as F


class Net(nn.Module):
    def forward(self, x):
        y = self.fc(x)  # shape-bug
        return F.softmax(y, dim=1)
"""


@pytest_lsp.fixture(
    scope="module",
    config=ClientServerConfig(server_command=[sys.executable, str(SUPPORT), "--fake-shapes"]),
)
async def client(request: pytest.FixtureRequest, lsp_client: LanguageClient):
    root = request.getfixturevalue("workspace")
    await lsp_client.initialize_session(
        types.InitializeParams(
            capabilities=client_capabilities("neovim"),
            root_uri=root.as_uri(),
            initialization_options={"debounceMs": 10, "shapes": True},
        )
    )
    yield
    await lsp_client.shutdown_session()


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("shapes")


def save(doc: Doc) -> None:
    doc.client.text_document_did_save(
        types.DidSaveTextDocumentParams(text_document=types.TextDocumentIdentifier(uri=doc.uri))
    )


async def test_shapes_join_later_without_delaying_source_diagnostics(
    client: LanguageClient, workspace: Path
) -> None:
    doc = Doc(client, workspace / "later.py", SOURCE + "# shape-delay: 2\n")
    first = await doc.diagnostics(lambda ds: "TL9901" in codes(ds))
    assert codes(first) == ["TL9901"]  # source rules did not wait for the slow shape check
    found = await doc.diagnostics(lambda ds: "TL6901" in codes(ds))
    assert codes(found) == ["TL6901", "TL9901"]
    (shape,) = [d for d in found if d.code == "TL6901"]
    assert shape.range.start.line == 7
    # Shape findings get the same code actions and hover as the others.
    actions = await doc.actions(shape)
    quick = [a.title for a in actions if a.kind == types.CodeActionKind.QuickFix]
    assert quick == ["Disable TL6901 for this line"]
    hover = await client.text_document_hover_async(
        types.HoverParams(
            text_document=types.TextDocumentIdentifier(uri=doc.uri), position=shape.range.start
        )
    )
    assert hover is not None and isinstance(hover.contents, types.MarkupContent)
    assert hover.contents.value.startswith("# fake-shape (TL6901)")
    # An edit makes shape findings stale: they go, and come back on save.
    doc.replace(doc.text.replace("# shape-delay: 2", "# shape-delay: 0"))
    await doc.diagnostics(lambda ds: codes(ds) == ["TL9901"])
    save(doc)
    await doc.diagnostics(lambda ds: codes(ds) == ["TL6901", "TL9901"])
    doc.close()


async def test_an_edit_cancels_a_running_shape_check(
    client: LanguageClient, workspace: Path
) -> None:
    doc = Doc(client, workspace / "cancel.py", SOURCE + "# shape-delay: 1.5\n")
    await doc.diagnostics(lambda ds: codes(ds) == ["TL9901"])
    doc.replace(doc.text + "\n")  # while the shape check of the opened text runs
    await doc.diagnostics(lambda ds: codes(ds) == ["TL9901"])
    await asyncio.sleep(2.5)
    assert codes(list(client.diagnostics[doc.uri])) == ["TL9901"]  # no stale shape result
    save(doc)  # the worker was stopped; saving starts a new one
    await doc.diagnostics(lambda ds: codes(ds) == ["TL6901", "TL9901"])
    doc.close()


async def test_noqa_applies_to_shape_findings(client: LanguageClient, workspace: Path) -> None:
    doc = Doc(
        client, workspace / "noqa.py", SOURCE.replace("# shape-bug", "# noqa: TL6901  # shape-bug")
    )
    await doc.diagnostics(lambda ds: codes(ds) == ["TL9901"])
    save(doc)
    await asyncio.sleep(1.0)
    assert codes(list(client.diagnostics[doc.uri])) == ["TL9901"]
    doc.close()


async def test_a_notebooks_shape_findings_land_on_their_cells(
    client: LanguageClient, workspace: Path
) -> None:
    """The notebook's code cells are shape-checked as one module, as the command line checks an
    `.ipynb` file; each finding is published on its cell, in the cell's coordinates, beside
    that cell's other findings, and goes stale with an edit like a file's."""
    from tests.test_server_notebook import Notebook

    imports = "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F"
    model = SOURCE.split("\n\n\n", 1)[1]
    nb = Notebook(
        client,
        workspace / "shapes.ipynb",
        [("markdown", "# A model"), ("code", imports), ("code", model)],
    )
    cell = nb.uri_of(2)
    found = await nb.until(lambda f: "TL6901" in codes(f.get(cell, [])))
    assert codes(found[cell]) == ["TL6901", "TL9901"]
    (shape,) = [d for d in found[cell] if d.code == "TL6901"]
    assert shape.range.start.line == 2  # `y = self.fc(x)  # shape-bug`, third line of its cell
    assert found.get(nb.uri_of(1)) == []
    nb.edit(2, "return F.softmax(y, dim=1)", "return F.softmax(y, dim=-1)")
    await nb.until(lambda f: codes(f.get(cell, [])) == ["TL9901"])  # stale until saved
    nb.save()
    await nb.until(lambda f: codes(f.get(cell, [])) == ["TL6901", "TL9901"])
    nb.close()
