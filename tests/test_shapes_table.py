"""Shape insight: `torchlint shapes PATH[::Class]` tables, on the seeds' examples and a zoo.

One worker run (through the command line, JSON output) serves every test that needs torch;
the text rendering is tested on its tables and on hand-made ones (no torch needed there).
"""

from __future__ import annotations

import importlib.util
import io
import json
import subprocess
import sys
from contextlib import redirect_stdout
from pathlib import Path
from typing import Any

import pytest

from torchlint.cli import main
from torchlint.shapes import torch_available
from torchlint.shapes.render import Style, fit, render_table, visible_rows

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples" / "models.py"
needs_torch = pytest.mark.skipif(
    not torch_available(), reason="shape tables need torch (pip install torch)"
)
HAS_TRANSFORMERS = importlib.util.find_spec("transformers") is not None

ZOO = """
import torch
import torch.nn as nn
import torch.nn.functional as F

open(MARKER, "w").write("the script ran")


class LeNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 6, 5)
        self.pool = nn.MaxPool2d(2, 2)
        self.conv2 = nn.Conv2d(6, 16, 5)
        self.fc1 = nn.Linear(16 * 5 * 5, 120)
        self.fc2 = nn.Linear(120, 10)

    def forward(self, x):
        x = self.pool(F.relu(self.conv1(x)))
        x = self.pool(F.relu(self.conv2(x)))
        x = torch.flatten(x, 1)
        x = F.relu(self.fc1(x))
        return self.fc2(x)


class MnistNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(1, 32, 3, padding=1)
        self.pool = nn.MaxPool2d(2)
        self.fc = nn.Linear(32 * 14 * 14, 10)

    def forward(self, x):
        x = self.pool(F.relu(self.conv(x)))
        x = x.view(x.size(0), -1)
        return self.fc(x)


class VGGish(nn.Module):
    def __init__(self, classes=10):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 32, 3, padding=1),
            nn.ReLU(inplace=True),
            nn.MaxPool2d(2),
            nn.Conv2d(32, 64, 3, padding=1),
            nn.AdaptiveAvgPool2d(4),
        )
        self.classifier = nn.Sequential(nn.Flatten(), nn.Linear(64 * 16, classes))

    def forward(self, x):
        return self.classifier(self.features(x))


class BasicBlock(nn.Module):
    def __init__(self, inplanes, planes, stride=1, downsample=None):
        super().__init__()
        self.conv1 = nn.Conv2d(inplanes, planes, 3, stride=stride, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = nn.Conv2d(planes, planes, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.downsample = downsample

    def forward(self, x):
        identity = x
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        if self.downsample is not None:
            identity = self.downsample(x)
        out += identity
        return self.relu(out)


class TinyResNet(nn.Module):
    def __init__(self, num_classes=10):
        super().__init__()
        self.stem = nn.Conv2d(3, 64, 7, stride=2, padding=3, bias=False)
        self.layer1 = nn.Sequential(BasicBlock(64, 64), BasicBlock(64, 64))
        down = nn.Sequential(nn.Conv2d(64, 128, 1, stride=2, bias=False), nn.BatchNorm2d(128))
        self.layer2 = nn.Sequential(BasicBlock(64, 128, 2, down))
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(128, num_classes)

    def forward(self, x):
        x = self.layer2(self.layer1(self.stem(x)))
        return self.fc(torch.flatten(self.pool(x), 1))


class TinyTransformer(nn.Module):
    def __init__(self, vocab=1000, dim=64):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        layer = nn.TransformerEncoderLayer(dim, 4, 128, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, 2)
        self.head = nn.Linear(dim, 3)

    def forward(self, tokens):
        h = self.encoder(self.embed(tokens))
        return self.head(h.mean(dim=1))


class NotAsked(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        return self.fc(x)


mlp = nn.Sequential(nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 10))
"""

HF = """

from transformers import GPT2Config, GPT2Model


class TinyGPT2Classifier(nn.Module):
    def __init__(self):
        super().__init__()
        config = GPT2Config(vocab_size=1000, n_positions=64, n_embd=64, n_layer=2, n_head=4)
        self.backbone = GPT2Model(config)
        self.head = nn.Linear(64, 2)

    def forward(self, input_ids):
        hidden = self.backbone(input_ids).last_hidden_state
        return self.head(hidden[:, -1])
"""

ASKED = ["LeNet", "MnistNet", "VGGish", "TinyResNet", "TinyTransformer", "mlp"]


@pytest.fixture(scope="module")
def zoo(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    folder = tmp_path_factory.mktemp("zoo")
    marker = folder / "ran.txt"
    path = folder / "zoo.py"
    path.write_text(ZOO.replace("MARKER", repr(str(marker))) + (HF if HAS_TRANSFORMERS else ""))
    return path, marker


@pytest.fixture(scope="module")
def result(zoo: tuple[Path, Path]) -> dict[str, Any]:
    """`torchlint shapes examples/models.py zoo.py::LeNet ... --output-format json`."""
    path = zoo[0]
    names = ASKED + (["TinyGPT2Classifier"] if HAS_TRANSFORMERS else [])
    args = ["shapes", str(EXAMPLES), *(f"{path}::{n}" for n in names), "--output-format", "json"]
    out = io.StringIO()
    with redirect_stdout(out):
        code = main(args)
    payload = json.loads(out.getvalue())
    payload["exit"] = code
    payload["by_model"] = {t["model"]: t for t in payload["models"]}
    return payload


def _rows(table: dict[str, Any], depth: int = 1) -> list[dict[str, Any]]:
    return visible_rows(table, depth)[0]


def _row(table: dict[str, Any], name: str) -> dict[str, Any]:
    return next(r for r in table["rows"] if r["name"] == name)


@needs_torch
def test_simple_cnn_that_forgets_flatten(result: dict[str, Any]) -> None:
    table = result["by_model"]["SimpleCNN"]
    assert table["status"] == "failed"
    assert table["finding"]["code"] == "TL602"
    # The docstring names CIFAR-10: the input is taken to be 32x32.
    assert table["input"]["shapes"] == ["[N, 3, 32, 32]"]
    assert table["input"]["source"] == "image"
    names = [r["name"] for r in _rows(table)]
    relu1, relu2 = "F.relu(self.conv1(x))", "F.relu(self.conv2(x))"
    assert names == ["conv1", relu1, "pool", "conv2", relu2, "pool", "fc1"]
    fc1 = _row(table, "fc1")
    assert fc1["failed"] and fc1["detail"] == "Linear(2048, 128)" and fc1["line"] == 22
    assert fc1["inputs"][0]["shape"] == "[N, 32, 8, 8]"
    assert _row(table, "conv1")["detail"] == "Conv2d(3, 16, k=3, s=1, p=1)"
    assert _row(table, "conv1")["params"] == 448
    text = render_table(table, width=120, display="models.py")
    assert "\u2717 TL602" in text
    assert "add torch.flatten(x, 1) before it" in text
    assert "fc2" not in text  # the table stops at the first failure
    assert result["exit"] == 1  # a model fails (TL601-TL605)


@needs_torch
def test_my_model_with_wrong_fc2(result: dict[str, Any]) -> None:
    table = result["by_model"]["MyModel"]
    assert table["finding"]["code"] == "TL601"
    fc2 = _row(table, "fc2")
    assert fc2["failed"] and fc2["inputs"][0]["shape"] == "[N, 20]"
    assert table["params"] == 530
    # Its heads are kept in a plain list (TL401): unregistered, they still run, and the
    # first one tells the input.
    ensemble = result["by_model"]["Ensemble"]
    assert ensemble["status"] == "ok"
    assert ensemble["input"]["shapes"] == ["[N, 64]"]
    skipped = {"model": "Ensemble", "status": "skipped", "path": "models.py", "line": 38}
    skipped["reason"] = "shape check of Ensemble skipped: cannot infer the shape of `x`"
    assert "No table: cannot infer the shape of `x`" in render_table(skipped)


@needs_torch
def test_symbolic_sizes_are_simplified_and_named(result: dict[str, Any]) -> None:
    lenet = result["by_model"]["LeNet"]
    assert lenet["status"] == "ok"
    pools = [r for r in lenet["rows"] if r["name"] == "pool"]
    assert [p["outputs"][0]["shape"] for p in pools] == [
        "[N, 6, H/2-2, W/2-2]",
        "[N, 16, H/4-3, W/4-3]",
    ]
    assert pools[0]["outputs"][0]["dims"] == ["N", 6, "H/2-2", "W/2-2"]
    assert lenet["constraints"] == [
        "H = W = 32 to 35, or any H, W with (H//4-3)\u00b7(W//4-3) = 25"
    ]
    mnist = result["by_model"]["MnistNet"]
    view = next(r for r in mnist["rows"] if r["kind"] == "op" and r["type"] == ".view")
    assert view["outputs"][0]["shape"] == "[N, 32*(H/2)*(W/2)]"
    assert mnist["constraints"] == ["H = W = 28 or 29, or any H, W with (H//2)\u00b7(W//2) = 196"]
    assert mnist["output"] == [
        {"name": "", "shape": "[N, 10]", "dims": ["N", 10], "dtype": "float32"}
    ]
    text = render_table(mnist, width=120)
    assert "Input must satisfy: H = W = 28 or 29" in text
    assert "Output: [N, 10]" in text


@needs_torch
def test_sequential_layers_are_named_by_position(result: dict[str, Any]) -> None:
    vgg = result["by_model"]["VGGish"]
    names = [r["name"] for r in _rows(vgg)]
    assert names[:5] == [f"features.{i}" for i in range(5)]
    assert _row(vgg, "features.3")["detail"] == "Conv2d(32, 64, k=3, s=1, p=1)"
    assert _row(vgg, "features.4")["outputs"][0]["shape"] == "[N, 64, 4, 4]"
    mlp = result["by_model"]["mlp"]
    assert [r["name"] for r in _rows(mlp)] == ["mlp.0", "mlp.1", "mlp.2"]
    assert mlp["params"] == 784 * 256 + 256 + 256 * 10 + 10


@needs_torch
def test_resnet_blocks_expand_with_depth(result: dict[str, Any]) -> None:
    resnet = result["by_model"]["TinyResNet"]
    top = [r["name"] for r in _rows(resnet)]
    assert top[:4] == ["stem", "layer1.0", "layer1.1", "layer2.0"]
    assert _row(resnet, "stem")["outputs"][0]["shape"] == "[N, 64, (H+1)/2, (W+1)/2]"
    deeper = [r["name"] for r in _rows(resnet, depth=2)]
    assert "layer1.1.conv1" in deeper and "layer2.0.downsample.0" in deeper
    # The second identical block is replayed from the first, under its own names.
    assert _row(resnet, "layer1.1.conv1").get("replayed")
    assert _row(resnet, "layer2.0.conv1")["outputs"][0]["shape"] == "[N, 128, (H+3)/4, (W+3)/4]"
    text = render_table(resnet, depth=2, width=140)
    assert "  layer1.0.conv1" in text  # indented under its block


@needs_torch
def test_transformers(result: dict[str, Any]) -> None:
    small = result["by_model"]["TinyTransformer"]
    assert small["input"]["shapes"] == ["[N, L]"] and small["input"]["dtypes"] == ["int64"]
    assert [r["name"] for r in _rows(small)] == ["embed", "encoder", "h.mean(dim=1)", "head"]
    assert small["output"][0]["shape"] == "[N, 3]"
    if not HAS_TRANSFORMERS:
        pytest.skip("transformers is not installed")
    hf = result["by_model"]["TinyGPT2Classifier"]
    assert hf["status"] == "ok"
    assert _row(hf, "backbone")["detail"] == "GPT2Model"
    assert _row(hf, "backbone.h.1")["outputs"][0]["shape"] == "[N, L, 64]"
    assert hf["output"][0]["shape"] == "[N, 2]"


@needs_torch
def test_only_the_named_models_and_never_the_script(
    result: dict[str, Any], zoo: tuple[Path, Path]
) -> None:
    assert "NotAsked" not in result["by_model"]
    assert not zoo[1].exists()  # the module-level open() never ran


def test_without_torch_one_line_and_exit_2(tmp_path: Path) -> None:
    path = tmp_path / "model.py"
    path.write_text("import torch.nn as nn\n\nclass Net(nn.Module):\n    pass\n")
    code = (
        "import sys; sys.modules['torch'] = None\n"
        "from torchlint.cli import main\n"
        f"sys.exit(main(['shapes', {str(path)!r}]))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=False
    )
    assert done.returncode == 2
    assert done.stdout == ""
    assert done.stderr.strip().splitlines() == [
        "error: `torchlint shapes` needs torch; install it (pip install torch)"
    ]


# --- rendering (no torch) ------------------------------------------------------------------------


def _table() -> dict[str, Any]:
    def shape(text: str) -> list[dict[str, Any]]:
        return [{"shape": text, "dims": [], "dtype": "float32"}]

    wide = "[N, 128, (H+7)/8, (W+7)/8]"
    rows = [
        {"index": 0, "kind": "module", "name": "stem", "type": "Conv2d", "depth": 1},
        {"index": 1, "kind": "container", "name": "layer", "type": "Sequential", "depth": 1},
        {"index": 2, "kind": "module", "name": "layer.0", "type": "Block", "depth": 1},
        {"index": 3, "kind": "module", "name": "layer.0.conv", "type": "Conv2d", "depth": 2},
        {"index": 4, "kind": "op", "name": "torch.flatten(x, 1)", "type": "torch.flatten"},
    ]
    details = ["Conv2d(3, 128, k=7, s=8, p=3)", "Sequential(1)", "Block", "Conv2d(128, 64, k=3)"]
    for row, parent, detail in zip(rows, [None, None, 1, 2, None], [*details, ""], strict=True):
        row.update(
            parent=parent,
            detail=detail,
            inputs=shape(wide),
            outputs=shape(wide),
            params=1000,
            line=10 + row["index"],
            path="m.py",
        )
    rows[4]["depth"] = 1
    rows[3].update(failed=True, outputs=[], error="RuntimeError: boom")
    rows = rows[:4]
    return {
        "model": "Net",
        "path": "m.py",
        "line": 3,
        "status": "failed",
        "finding": {"code": "TL603", "message": "conv expects 128 input channels"},
        "input": {"names": ["x"], "shapes": ["[N, 3, H, W]"], "dtypes": ["float32"]}
        | {"source": "inferred", "symbolic": True, "sizes": {"N": 2, "H": 96, "W": 96}},
        "rows": rows,
        "params": 4000,
        "constraints": [],
    }


def test_failure_inside_a_block_marks_the_block_at_depth_1() -> None:
    table = _table()
    shown, marked = visible_rows(table, 1)
    assert [r["name"] for r in shown] == ["stem", "layer.0"]  # containers are transparent
    assert marked == 2
    shown, marked = visible_rows(table, 2)
    assert marked == 3
    text = render_table(table, width=200)
    assert "\u2717 TL603 conv expects 128 input channels" in text
    assert "Output: none" in text


def test_wide_tables_fit_the_width() -> None:
    table = _table()
    text = render_table(table, depth=2, width=72)
    lines = text.splitlines()
    header = next(line for line in lines if line.startswith("Layer"))
    assert "Input" not in header  # given up first: it is mostly the previous output
    body = lines[lines.index(header) : lines.index(header) + 6]
    assert all(len(line) <= 72 for line in body), "\n".join(body)
    assert any("\u2026" in line for line in body)  # shortened in the middle
    assert "Input" in render_table(table, depth=2, width=200)


def test_fit_shrinks_the_widest_flexible_column_first() -> None:
    assert fit([10, 40, 20, 20, 7, 4], 100) == [10, 29, 20, 20, 7, 4]
    assert fit([10, 40, 40, 20, 7, 4], 100) == [10, 24, 25, 20, 7, 4]
    assert fit([10, 20, 20, 20, 7, 4], 200) == [10, 20, 20, 20, 7, 4]


def test_ascii_terminals() -> None:
    style = Style.for_encoding("ascii")
    text = render_table(_table(), width=200, style=style)
    assert text.isascii()
    assert "x TL603" in text


def test_a_block_without_a_table_names_the_model_it_was_checked_in() -> None:
    from torchlint.shapes.insight import _inside

    tables = [{"model": "ResNet", "rows": [{"name": "layer1.0", "type": "BasicBlock"}]}]
    assert _inside("BasicBlock", tables) == ("checked inside ResNet (as layer1.0); see its table")
    assert _inside("Bottleneck", tables) is None
