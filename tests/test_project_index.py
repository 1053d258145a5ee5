"""Findings that need another file of the project: resolution, caching, sharding."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import run_cli

MODELS = """\
import torch.nn as nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 2)
        self.head = nn.Sequential(nn.Linear(2, 2), nn.Softmax(dim=1))

    def forward(self, x):
        return self.head(self.fc(x))
"""
TRAIN = """\
import torch.nn as nn
from models import Net


def step(x, y):
    return nn.CrossEntropyLoss()(Net()(x), y)
"""


def _project(root: Path) -> Path:
    (root / "pyproject.toml").write_text("[tool.torchlint]\n", encoding="utf-8")
    (root / "models.py").write_text(MODELS, encoding="utf-8")
    (root / "train.py").write_text(TRAIN, encoding="utf-8")
    return root


def test_a_file_run_alone_reads_what_it_imports(tmp_path: Path) -> None:
    project = _project(tmp_path)
    result = run_cli("train.py", "--no-shapes", "--no-cache", cwd=project)
    assert "train.py:6:34: TL101" in result.stdout
    assert "`Net.forward` in models.py returns softmax output" in result.stdout


def test_editing_an_imported_file_refreshes_the_cached_result(tmp_path: Path) -> None:
    project = _project(tmp_path)
    first = run_cli(".", "--no-shapes", cwd=project)
    assert "TL101" in first.stdout
    assert list((project / ".torchlint_cache" / "summaries").rglob("*.json"))
    models = project / "models.py"
    models.write_text(MODELS.replace("nn.Softmax(dim=1)", "nn.Identity()"), encoding="utf-8")
    second = run_cli(".", "--no-shapes", cwd=project)
    assert "TL101" not in second.stdout, second.stdout


def test_relative_import_inside_a_package(tmp_path: Path) -> None:
    project = _project(tmp_path)
    package = project / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("", encoding="utf-8")
    (package / "models.py").write_text(MODELS, encoding="utf-8")
    (package / "train.py").write_text(
        TRAIN.replace("from models import Net", "from .models import Net"), encoding="utf-8"
    )
    result = run_cli("pkg/train.py", "--no-shapes", "--no-cache", cwd=project)
    assert "pkg/train.py:6:34: TL101" in result.stdout


def test_an_unreadable_imported_file_costs_nothing(tmp_path: Path) -> None:
    project = _project(tmp_path)
    (project / "models.py").write_text("class Net(:\n", encoding="utf-8")
    result = run_cli("train.py", "--no-shapes", "--no-cache", cwd=project)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Traceback" not in result.stderr


LAYERS = """\
import torch.nn as nn


def mlp_layers(sizes):
    layers = []
    for d_in, d_out in zip(sizes[:-1], sizes[1:]):
        layers.append(nn.Linear(d_in, d_out))
    return layers
"""
TOWER = """\
import torch.nn as nn
from layers import mlp_layers


class Tower(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = mlp_layers([4, 4, 4])
"""


def test_a_container_built_in_another_file_survives_the_summary_cache(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text("[tool.torchlint]\n", encoding="utf-8")
    (tmp_path / "layers.py").write_text(LAYERS, encoding="utf-8")
    (tmp_path / "tower.py").write_text(TOWER, encoding="utf-8")
    first = run_cli("tower.py", "--no-shapes", cwd=tmp_path)
    assert "tower.py:8:23: TL401" in first.stdout, first.stdout
    assert list((tmp_path / ".torchlint_cache" / "summaries").rglob("*.json"))
    (tmp_path / "tower.py").write_text(TOWER + "\n", encoding="utf-8")  # re-lint, cached summary
    second = run_cli("tower.py", "--no-shapes", cwd=tmp_path)
    assert "tower.py:8:23: TL401" in second.stdout, second.stdout


ATTENTION = """\
import torch.nn as nn


class CausalAttention(nn.Module):
    def __init__(self, d_in, d_out, dropout):
        super().__init__()
        self.query = nn.Linear(d_in, d_out)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x):
        return self.dropout(self.query(x))
"""
DEMO = """\
import torch
from attention import CausalAttention


def demo(batch):
    quiet = CausalAttention(3, 2, 0.0)
    noisy = CausalAttention(3, 2, dropout=0.1)
    with torch.no_grad():
        return quiet(batch), noisy(batch)
"""


def test_a_dropout_rate_given_in_another_file_decides_the_mode_layers(tmp_path: Path) -> None:
    """A class whose only mode layers are dropouts at the rate its caller gives does the
    same in both modes when built at rate 0, also from the summary cache."""
    (tmp_path / "pyproject.toml").write_text("[tool.torchlint]\n", encoding="utf-8")
    (tmp_path / "attention.py").write_text(ATTENTION, encoding="utf-8")
    (tmp_path / "demo.py").write_text(DEMO, encoding="utf-8")
    for _ in range(2):  # the second run reads the cached summary of attention.py
        result = run_cli("demo.py", "--no-shapes", "--select", "TL504", cwd=tmp_path)
        found = [line for line in result.stdout.splitlines() if "TL504" in line]
        assert len(found) == 1 and "noisy" in found[0], result.stdout
