"""Shape checks on notebooks: the models of the joined code cells are built and checked as a
file's are, findings land in their cell, and a local module the notebook imports is found."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("torch", reason="shape checks (TL6xx) need torch installed")

from tests.conftest import run_cli

IMPORTS = """%matplotlib inline
import torch
import torch.nn as nn
import torch.nn.functional as F
from torchvision import datasets, transforms
from layers import Head
"""

MODELS = """class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 32, 3)
        self.conv2 = nn.Conv2d(32, 64, 3)
        self.fc1 = nn.Linear(64 * 7 * 7, 128)
        self.fc2 = nn.Linear(128, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        x = torch.flatten(x, 1)
        return self.fc2(F.relu(self.fc1(x)))


class PaddedNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(1, 16, 3, padding=1)
        self.head = Head(16 * 14 * 14, 10)

    def forward(self, x):
        return self.head(torch.flatten(F.max_pool2d(self.conv(x), 2), 1))
"""

TRAINING = """train = datasets.MNIST("data", download=True, transform=transforms.ToTensor())
loader = torch.utils.data.DataLoader(train, batch_size=64)
model, padded = Net(), PaddedNet()
for x, y in loader:
    loss = F.cross_entropy(model(x), y) + F.cross_entropy(padded(x), y)
"""

LAYERS = """import torch.nn as nn


class Head(nn.Module):
    def __init__(self, features, classes):
        super().__init__()
        self.fc = nn.Linear(features, classes)

    def forward(self, x):
        return self.fc(x)
"""


def _cell(kind: str, text: str) -> dict:
    cell = {"cell_type": kind, "metadata": {}, "source": text.splitlines(keepends=True)}
    return {**cell, "outputs": [], "execution_count": None} if kind == "code" else cell


def _write_notebook(folder: Path) -> None:
    cells = [
        _cell("code", IMPORTS),
        _cell("markdown", "# A CNN for MNIST digits"),
        _cell("code", MODELS),
        _cell("code", TRAINING),
    ]
    notebook = {"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 4}
    (folder / "mnist.ipynb").write_text(json.dumps(notebook), encoding="utf-8")
    (folder / "layers.py").write_text(LAYERS, encoding="utf-8")


def test_a_notebook_model_is_shape_checked_and_reported_in_its_cell(tmp_path: Path) -> None:
    _write_notebook(tmp_path)
    result = run_cli(
        "mnist.ipynb",
        "--no-cache",
        "--select",
        "TL6",
        "--extend-select",
        "TL690",
        "--output-format",
        "json",
        cwd=tmp_path,
    )
    found = json.loads(result.stdout)
    assert [(d["code"], d["cell"], d["location"]["row"]) for d in found] == [("TL601", 3, 6)]
    assert "MNIST images [N, 1, 28, 28]" in found[0]["message"]
    # The places it names are cells too: the joined module's lines are no use to a reader.
    assert "used at mnist.ipynb:cell 4:" in found[0]["message"]
    assert "write nn.Linear(64 * 5 * 5, 128)" in found[0]["message"]
    assert result.stderr.strip() == ""


def test_a_notebooks_shape_tables_name_cells(tmp_path: Path) -> None:
    """`torchlint shapes` makes tables for a notebook's models, as for a file's: the model,
    its rows, its finding and the evidence are placed by cell and line in the cell."""
    _write_notebook(tmp_path)
    text = run_cli("shapes", "mnist.ipynb::Net", cwd=tmp_path)
    assert text.returncode == 1  # the table's model fails (TL601)
    assert text.stdout.startswith("Net (mnist.ipynb:cell 3:1)\n")
    assert "evidence: MNIST images [N, 1, 28, 28] used at mnist.ipynb:cell 4:1" in text.stdout
    assert "TL601 fc1 = nn.Linear(64 * 7 * 7, 128) expects 3136 input features" in text.stdout
    assert "at mnist.ipynb:cell 3:13); write nn.Linear(64 * 5 * 5, 128)" in text.stdout
    result = run_cli("shapes", "mnist.ipynb", "--output-format", "json", cwd=tmp_path)
    (net,) = [t for t in json.loads(result.stdout)["models"] if t["model"] == "Net"]
    assert (net["cell"], net["line"]) == (3, 1)
    fc1 = next(row for row in net["rows"] if row["name"] == "fc1")
    assert (fc1["cell"], fc1["line"]) == (3, 13)
    assert (net["finding"]["cell"], net["finding"]["line"]) == (3, 6)
