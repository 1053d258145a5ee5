"""Shape checks (TL601-TL606, TL690) on the fixtures, through the worker process."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch", reason="shape checks (TL6xx) need torch installed")

from tests.conftest import SPINNING_MODEL
from tests.fixture_expectations import expected_pairs
from torchlint.shapes import check_files

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures"
SINGLE = sorted(FIXTURES.glob("TL6*.py")) + sorted((FIXTURES / "shapes").glob("*.py"))
PROJECTS = sorted(p for p in (FIXTURES / "shapes").iterdir() if p.is_dir())


def _files(paths: list[Path]) -> list[tuple[str, str]]:
    return [(str(p), p.read_text(encoding="utf-8")) for p in paths]


SAFETY_SCRIPT = """
import torch
import torch.nn as nn

open({marker}/"top", "w").write("ran")


def train():
    open({marker}/"function", "w").write("ran")


class Net(nn.Module):
    open({marker}/"class-body", "w").write("ran")

    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(8, 4)
        self.fc2 = nn.Linear(5, 2)

    def forward(self, x):
        return self.fc2(self.fc1(x))


CONFIG = dict(log=open({marker}/"assignment", "w"))

if __name__ == "__main__":
    open({marker}/"main", "w").write("ran")
    train()
"""


@pytest.fixture(scope="module")
def safety_script(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A script that writes marker files from every kind of top-level code."""
    directory = tmp_path_factory.mktemp("safety")
    marker = directory / "markers"
    marker.mkdir()
    script = directory / "script.py"
    text = SAFETY_SCRIPT.replace("{marker}/", f"__import__('pathlib').Path({str(marker)!r})/")
    script.write_text(text)
    return script, marker


DECLARED_SOURCE = """
import torch
import torch.nn as nn


class Encoder(nn.Module):
    def __init__(self, in_dim, hidden):
        super().__init__()
        self.fc = nn.Linear(in_dim, hidden)
        self.norm = nn.LayerNorm(in_dim)

    def forward(self, x):
        return self.norm(self.fc(x))


class Pooled(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3)
        self.fc = nn.Linear(8 * 15 * 15, 2)

    def forward(self, x):
        return self.fc(torch.flatten(nn.functional.max_pool2d(self.conv(x), 2), 1))
"""
#: `[tool.torchlint.shapes]`: constructor arguments and an input shape per class.
DECLARED = {
    "declared_model:Encoder": {"args": {"in_dim": 16, "hidden": 32}},
    "declared_model:Pooled": {"input-shape": [4, 3, 64, 64]},
}


@pytest.fixture(scope="module")
def declared_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("declared") / "declared_model.py"
    path.write_text(DECLARED_SOURCE)
    return path


@pytest.fixture(scope="module")
def single_results(safety_script: tuple[Path, Path], declared_model: Path) -> dict[str, list]:
    """All single-file fixtures (and the safety and declared scripts) in one run: one
    worker start for most of this file."""
    return check_files(_files([*SINGLE, safety_script[0], declared_model]), declared=DECLARED)


def test_declared_configuration(declared_model: Path, single_results: dict[str, list]) -> None:
    found = {(d.line, d.code): d.message for d in single_results[str(declared_model)]}
    assert set(found) == {(10, "TL604"), (20, "TL601")}, found
    assert "for the input [4, 3, 64, 64] declared in [tool.torchlint.shapes]" in found[20, "TL601"]


@pytest.mark.parametrize("path", SINGLE, ids=lambda p: p.stem)
def test_single_file_fixture(path: Path, single_results: dict[str, list]) -> None:
    diagnostics = single_results.get(str(path), [])
    found = {(d.line, d.code) for d in diagnostics}
    assert found == expected_pairs(path), "\n".join(
        f"{d.line}:{d.column} {d.code} {d.message}" for d in diagnostics
    )


@pytest.mark.parametrize("project", PROJECTS, ids=lambda p: p.name)
def test_multi_file_fixture(project: Path) -> None:
    paths = sorted(project.rglob("*.py"))
    results = check_files(_files(paths))
    for path in paths:
        diagnostics = results.get(str(path), [])
        found = {(d.line, d.code) for d in diagnostics}
        assert found == expected_pairs(path), f"{path.name}:\n" + "\n".join(
            f"{d.line}:{d.column} {d.code} {d.message}" for d in diagnostics
        )


def test_messages_name_layer_producer_and_line(single_results: dict[str, list]) -> None:
    by_code = {(Path(d.path).name, d.line): d for items in single_results.values() for d in items}
    tl601 = by_code[("TL601.py", 13)]
    assert tl601.message == (
        "fc2 = nn.Linear(30, 10) expects 30 input features, but fc1 produces 20 for the input "
        "torch.randn(8, 784) at TL601.py:177 (x is [8, 20] at TL601.py:17); "
        "write nn.Linear(20, 10)"
    )
    assert tl601.fix is not None and not tl601.fix.safe
    assert [(e.start_line, e.start_column, e.end_column, e.content) for e in tl601.fix.edits] == [
        (13, 30, 32, "20")
    ]
    assert tl601.column == 20
    assert tl601.name == "linear-in-features-mismatch"
    tl602 = by_code[("TL602.py", 13)]
    assert tl602.message == (
        "fc1 = nn.Linear(6272, 128) receives a 4-D tensor [N, 32, H/2, W/2] from pool; "
        "add torch.flatten(x, 1) before it (forward, TL602.py:19)"
    )


def _messages_by_line(results: dict[str, list], filename: str) -> dict[int, str]:
    found = [d for items in results.values() for d in items]
    return {d.line: d.message for d in found if Path(d.path).name == filename}


def test_guessed_sizes_are_named_by_the_arguments(single_results: dict[str, list]) -> None:
    by_line = _messages_by_line(single_results, "symbolic_arguments.py")
    assert by_line[17] == (
        "head = nn.Linear(2*breadth, tokens) expects 2*breadth input features, but blocks.1 "
        "produces breadth (x is [N, L, breadth] at symbolic_arguments.py:23); "
        "write nn.Linear(breadth, tokens) (for every value of TokenStack's tokens, breadth and "
        "stack)"
    )
    assert by_line[54].endswith(
        "write nn.Linear(2*dim, dim) (for every value of GatedBlock's dim, when gated=True)"
    )
    assert by_line[77].endswith("(for every value of Pooler's dim, when mode='concat')")


def test_a_model_built_from_default_configuration_says_so(single_results: dict[str, list]) -> None:
    # A checkpoint's configuration may differ from the defaults that fail.
    by_line = _messages_by_line(single_results, "config_blocks.py")
    assert by_line[27].endswith("(with the defaults of TinyConfig)")


def test_no_code_of_the_user_script_runs(
    safety_script: tuple[Path, Path], single_results: dict[str, list]
) -> None:
    script, marker = safety_script
    assert list(marker.iterdir()) == []
    assert [d.code for d in single_results[str(script)]] == ["TL601"]


def test_timeout_and_crash_become_tl690_and_the_run_goes_on(tmp_path: Path) -> None:
    slow = SPINNING_MODEL.replace("Spin", "Slow")
    crash = """
import ctypes

import torch.nn as nn


class Crash(nn.Module):
    def __init__(self):
        super().__init__()
        ctypes.string_at(0)

    def forward(self, x):
        return x
"""
    fine = """
import torch.nn as nn


class Mismatch(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(4, 8)
        self.fc2 = nn.Linear(6, 2)

    def forward(self, x):
        return self.fc2(self.fc1(x))
"""
    files = [
        (str(tmp_path / f"{name}.py"), text)
        for name, text in [("slow", slow), ("crash", crash), ("fine", fine)]
    ]
    results = check_files(files, timeout=6.0)
    [slow_result] = results[files[0][0]]
    [crash_result] = results[files[1][0]]
    assert slow_result.code == "TL690" and "timed out" in slow_result.message
    assert crash_result.code == "TL690" and "crashed" in crash_result.message
    assert [d.code for d in results[files[2][0]]] == ["TL601"]


def test_a_crash_costs_only_the_model_it_happened_in(tmp_path: Path) -> None:
    source = """
import ctypes

import torch.nn as nn


class Before(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(4, 8)
        self.fc2 = nn.Linear(6, 2)

    def forward(self, x):
        return self.fc2(self.fc1(x))


class Crash(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 8)

    def forward(self, x):
        ctypes.string_at(0)
        return self.fc(x)


class After(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(4, 8)
        self.fc2 = nn.Linear(3, 2)

    def forward(self, x):
        return self.fc2(self.fc1(x))
"""
    path = str(tmp_path / "models.py")
    results = check_files([(path, source)], timeout=10.0)
    found = sorted((d.line, d.code, d.message) for d in results[path])
    codes = [(line, code) for line, code, _ in found]
    assert codes == [(11, "TL601"), (17, "TL690"), (31, "TL601")]
    assert "its check crashed the process (signal" in found[1][2]


def test_package_import_does_not_import_torch() -> None:
    code = "import sys, torchlint.shapes; assert 'torch' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)


def test_files_without_modules_start_no_worker() -> None:
    assert check_files([("plain.py", "import torch\nx = torch.zeros(3)\n")]) == {}


MNIST_PROJECT = {
    "model.py": """
import torch
import torch.nn as nn
import torch.nn.functional as F


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 32, 3)
        self.conv2 = nn.Conv2d(32, 32, 3)
        self.pool = nn.MaxPool2d(2)
        self.fc1 = nn.Linear(32 * 7 * 7, 128)
        self.fc2 = nn.Linear(128, 10)

    def forward(self, x):
        x = self.pool(F.relu(self.conv1(x)))
        x = self.pool(F.relu(self.conv2(x)))
        return self.fc2(F.relu(self.fc1(torch.flatten(x, 1))))
""",
    "train.py": """
import torch
from torchvision import datasets, transforms

from model import Net

data = datasets.MNIST("data", download=True, transform=transforms.ToTensor())
net = Net()
for images, labels in torch.utils.data.DataLoader(data, batch_size=64):
    net(images)
""",
}


def test_a_training_script_is_evidence_and_the_fix_is_written(tmp_path: Path) -> None:
    """The run lints the script too (it defines no model): its MNIST data makes the
    mismatch definite, and `--fix --unsafe-fixes` writes the corrected size."""
    from torchlint.config import Overrides
    from torchlint.runner import RunOptions, run

    for name, text in MNIST_PROJECT.items():
        (tmp_path / name).write_text(text)
    overrides = Overrides(shapes="on")
    found = run([tmp_path], overrides, RunOptions(use_cache=False)).diagnostics
    assert [(Path(d.path).name, d.line, d.code) for d in found] == [("model.py", 13, "TL601")]
    assert "for MNIST images [N, 1, 28, 28] used at train.py:7" in found[0].message
    assert found[0].message.endswith("write nn.Linear(32 * 5 * 5, 128)")
    fixing = RunOptions(use_cache=False, fix_mode="fix", unsafe_fixes=True)
    result = run([tmp_path], overrides, fixing)
    assert result.fixed == 1 and not result.diagnostics
    assert "nn.Linear(32 * 5 * 5, 128)" in (tmp_path / "model.py").read_text()


def test_a_recurrent_state_that_does_not_fit_is_named(single_results: dict[str, list]) -> None:
    """An initial state of the wrong size is reported as the state, not as the input (which
    fits): `h0` of one layer for a two-layer LSTM, a GRU's of the wrong width."""
    path = next(p for p in SINGLE if p.name == "recurrent_states.py")
    found = {d.line: d.message for d in single_results[str(path)] if d.code == "TL605"}
    assert found, single_results[str(path)]
    assert all("expects its state as" in message for message in found.values()), found
    assert any("[2, N, 128] and [2, N, 128], but gets [1, N, 128]" in m for m in found.values())
    assert any("[1, N, 64], but gets [1, N, 32]" in m for m in found.values())
