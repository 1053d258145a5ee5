"""A class of another installed library that the linted code calls as an older release
wanted is swapped for a stand-in while the model is built (`shapes/version_skew.py`)."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from torchlint.shapes import version_skew  # noqa: E402
from torchlint.shapes.build import build  # noqa: E402

LIBRARY = """
import torch.nn as nn


class Metric(nn.Module):
    def __init__(self, task, num_classes=None):
        super().__init__()
        self.task = task


class Accuracy(Metric):
    def __new__(cls, task, num_classes=None):
        return super().__new__(cls)
"""

MODEL = """
import torch.nn as nn
import skewlib
from skewlib import Metric


class Classifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Linear(8, 2)
        self.train_acc = skewlib.Accuracy()
        self.valid_acc = Metric()

    def forward(self, x):
        return self.net(x)


class Scored(Classifier):
    def forward(self, x):
        return self.train_acc(self.net(x))


class Broken(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Linear(8)

    def forward(self, x):
        return self.net(x)
"""


@pytest.fixture()
def modules(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    installed = tmp_path / "site"
    (installed).mkdir()
    (installed / "skewlib.py").write_text(LIBRARY)
    project = tmp_path / "project"
    project.mkdir()
    (project / "train.py").write_text(MODEL)
    monkeypatch.syspath_prepend(str(installed))
    monkeypatch.syspath_prepend(str(project))
    monkeypatch.setattr(version_skew, "_INSTALLED", (*version_skew._INSTALLED, f"{installed}/"))
    for name in ("skewlib", "train"):
        sys.modules.pop(name, None)
    yield importlib.import_module("train"), importlib.import_module("skewlib")
    for name in ("skewlib", "train"):
        sys.modules.pop(name, None)


def test_a_library_class_called_the_old_way_is_a_stand_in(modules) -> None:
    train, skewlib = modules
    model = build(train.Classifier, [], {})
    assert model.net.in_features == 8
    assert type(model.train_acc).__name__ == "Accuracy"
    # The swap lasts for the build only.
    assert skewlib.Accuracy is not type(model.train_acc) and train.Metric is skewlib.Metric


def test_a_forward_that_reaches_the_stand_in_is_told(modules) -> None:
    train, _ = modules
    model = build(train.Scored, [], {})
    with pytest.raises(version_skew.SkewedMember, match=r"skewlib\.Accuracy\(\.\.\.\) could"):
        model.train_acc(torch.ones(2, 2))


def test_a_torch_layer_called_wrongly_is_the_codes_own_mistake(modules) -> None:
    train, _ = modules
    with pytest.raises(TypeError, match="out_features"):
        build(train.Broken, [], {})


def test_numpy_gets_back_the_aliases_older_code_reads(monkeypatch: pytest.MonkeyPatch) -> None:
    numpy = pytest.importorskip("numpy")
    for name in ("float", "NaN"):
        if name in vars(numpy):
            monkeypatch.delattr(numpy, name)
    monkeypatch.setattr(numpy, "int", 7, raising=False)  # one the release still has: kept
    try:
        version_skew.numpy_aliases()
        assert numpy.float is float and numpy.NaN != numpy.NaN and numpy.int == 7
    finally:
        for name in ("float", "NaN"):  # the monkeypatch puts back what was there before
            vars(numpy).pop(name, None)
