"""Shape insight in the editor: inlay hints with tensor shapes, hover on layers.

The unit tests use hand-made tables (no torch); the end-to-end test runs the real server and
the real shape engine through pytest-lsp (Neovim 0.7, run headless by test_server_nvim.py,
has no inlay hints; pytest-lsp replays a newer Neovim's capabilities).
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

import pytest

from torchlint.shapes import torch_available

pytest.importorskip("lsprotocol", reason="the server needs lsprotocol and pygls")
from torchlint.server.inlay import layer_at, layer_markdown, ranked, shape_hints

SOURCE = """\
import torch.nn as nn
import torch.nn.functional as F


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 6, 5)
        self.pool = nn.MaxPool2d(2, 2)
        self.fc1 = nn.Linear(6 * 14 * 14, 10)

    def forward(self, x):
        x = self.pool(F.relu(self.conv1(x)))
        x = x.flatten(1)
        return self.fc1(x)
"""


def _row(index: int, name: str, span: list[int], out: str, **extra: Any) -> dict[str, Any]:
    return {
        "index": index,
        "kind": "module",
        "name": name,
        "type": "Conv2d",
        "detail": "Conv2d(3, 6, k=5, s=1)",
        "depth": 1,
        "parent": None,
        "inputs": [{"shape": "[N, 3, H, W]"}],
        "outputs": [{"shape": out}] if out else [],
        "params": 456,
        "line": span[0],
        "span": span,
        "path": "/w/net.py",
        **extra,
    }


def _tables() -> list[dict[str, Any]]:
    pool = _row(1, "pool", [13, 12, 13, 44], "[N, 6, H/2-2, W/2-2]", type="MaxPool2d")
    rows = [
        _row(0, "conv1", [13, 30, 13, 43], "[N, 6, H-4, W-4]"),
        pool,
        {**_row(2, "x.flatten(1)", [14, 12, 14, 24], "[N, 6*(H/2-2)*(W/2-2)]"), "kind": "op"},
        _row(3, "fc1", [15, 15, 15, 26], "", type="Linear", failed=True, detail="Linear(1176, 10)"),
    ]
    modules = [
        {
            "name": "fc1",
            "attr": "fc1",
            "owner": "Net",
            "detail": "Linear(1176, 10)",
            "params": 11770,
        }
    ]
    finding = {"code": "TL601", "message": "fc1 expects 1176 input features"}
    return [{"model": "Net", "class": "Net", "rows": rows, "modules": modules, "finding": finding}]


def test_hints_at_the_end_of_assignments() -> None:
    hints = shape_hints(SOURCE, "/w/net.py", _tables())
    assert [(h.line, h.column, h.label) for h in hints] == [
        (13, 44, ": [N, 6, H/2-2, W/2-2]"),
        (14, 24, ": [N, 6*(H/2-2)*(W/2-2)]"),
    ]  # the failing `return self.fc1(x)` has no output, and is no assignment
    assert shape_hints(SOURCE, "/w/other.py", _tables()) == []


def test_hover_finds_self_attributes_in_their_class() -> None:
    assert layer_at(SOURCE, 15, 19) == ("Net", "fc1", (15, 15, 15, 23))
    assert layer_at(SOURCE, 10, 14) == ("Net", "fc1", (10, 8, 10, 16))
    assert layer_at(SOURCE, 15, 5) is None
    markdown = layer_markdown(_tables(), "Net", "fc1")
    assert markdown is not None
    assert markdown.startswith("**`self.fc1`**: `Linear(1176, 10)`, 11,770 parameters")
    assert "| 15 | `[N, 3, H, W]` | `\u2717 TL601` |" in markdown
    assert layer_markdown(_tables(), "Other", "fc1") is None


def test_models_inside_others_rank_after_them() -> None:
    outer = {"model": "Big", "class": "Big", "rows": [{"kind": "module", "type": "Net"}]}
    inner = _tables()[0]
    assert [t["model"] for _, t in ranked([inner, outer])] == ["Big", "Net"]


# --- end to end -------------------------------------------------------------------------------

pytest_lsp = pytest.importorskip("pytest_lsp", reason="pytest-lsp is not installed")
from lsprotocol import types  # noqa: E402
from pytest_lsp import ClientServerConfig, LanguageClient, client_capabilities  # noqa: E402

from tests.test_server_lsp import Doc  # noqa: E402

TIMEOUT = 150.0
MODEL = """\
import torch
import torch.nn as nn
import torch.nn.functional as F


class LeNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 6, 5)
        self.pool = nn.MaxPool2d(2, 2)
        self.fc1 = nn.Linear(16 * 5 * 5, 10)
        self.conv2 = nn.Conv2d(6, 16, 5)

    def forward(self, x):
        x = self.pool(F.relu(self.conv1(x)))
        x = self.pool(F.relu(self.conv2(x)))
        x = torch.flatten(x, 1)
        return self.fc1(x)
"""


def _client() -> LanguageClient:
    from pytest_lsp import make_test_lsp_client

    client = make_test_lsp_client()
    client.refreshes = 0  # type: ignore[attr-defined]

    @client.feature(types.WORKSPACE_INLAY_HINT_REFRESH)
    def refresh(ls: LanguageClient, params: None) -> None:
        ls.refreshes += 1  # type: ignore[attr-defined]

    return client


@pytest_lsp.fixture(
    scope="module",
    config=ClientServerConfig(
        server_command=[sys.executable, "-m", "torchlint", "server"], client_factory=_client
    ),
)
async def client(lsp_client: LanguageClient, tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("inlay")
    await lsp_client.initialize_session(
        types.InitializeParams(
            capabilities=client_capabilities("neovim"),
            root_uri=root.as_uri(),
            initialization_options={"debounceMs": 10, "shapes": True},
        )
    )
    lsp_client.root = root  # type: ignore[attr-defined]
    yield
    await lsp_client.shutdown_session()


async def _hints(client: LanguageClient, doc: Doc) -> list[types.InlayHint]:
    found = await client.text_document_inlay_hint_async(
        types.InlayHintParams(
            text_document=types.TextDocumentIdentifier(uri=doc.uri),
            range=types.Range(types.Position(0, 0), types.Position(100, 0)),
        )
    )
    return list(found or [])


async def _hover(client: LanguageClient, doc: Doc, line: int, character: int) -> str:
    found = await client.text_document_hover_async(
        types.HoverParams(
            text_document=types.TextDocumentIdentifier(uri=doc.uri),
            position=types.Position(line, character),
        )
    )
    if found is None:
        return ""
    assert isinstance(found.contents, types.MarkupContent)
    return found.contents.value


@pytest.mark.asyncio(loop_scope="module")
@pytest.mark.skipif(not torch_available(), reason="shape checks need torch installed")
async def test_hints_and_hover_from_the_real_engine(client: LanguageClient) -> None:
    root: Path = client.root  # type: ignore[attr-defined]
    doc = Doc(client, root / "lenet.py", MODEL)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + TIMEOUT
    hints = await _hints(client, doc)
    while not hints:
        assert loop.time() < deadline, "no inlay hints"
        await asyncio.sleep(0.25)
        hints = await _hints(client, doc)
    labels = {h.position.line + 1: h.label for h in hints}
    assert labels == {
        15: ": [N, 6, H/2-2, W/2-2]",
        16: ": [N, 16, H/4-3, W/4-3]",
        17: ": [N, 16*(H/4-3)*(W/4-3)]",
    }
    (first,) = [h for h in hints if h.position.line == 14]
    assert first.position.character == len(MODEL.splitlines()[14])
    assert first.kind == types.InlayHintKind.Type
    assert client.refreshes >= 1  # type: ignore[attr-defined]
    in_forward = await _hover(client, doc, 17, 21)  # `return self.fc1(x)`
    assert in_forward.startswith("**`self.fc1`**: `Linear(400, 10)`, 4,010 parameters")
    assert "| 18 | `[N, 16*(H/4-3)*(W/4-3)]` | `[N, 10]` |" in in_forward
    in_init = await _hover(client, doc, 10, 14)  # `self.fc1 = nn.Linear(...)`
    assert in_init == in_forward
    # An edit makes the shapes stale: hints and layer hover go until the next check.
    doc.replace(MODEL + "\n# edited\n")
    await asyncio.sleep(0.3)
    assert await _hints(client, doc) == []
    assert await _hover(client, doc, 17, 21) == ""
    doc.close()
