"""Behaviour of TL104, TL304, TL701 and TL704 that a single fixture file cannot show."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from torchlint import torch_version
from torchlint.cli import main
from torchlint.config import clear_cache
from torchlint.engine import lint_source


def test_log_softmax_import_is_added_when_missing() -> None:
    source = (
        '"""Module docstring."""\n'
        "from __future__ import annotations\n"
        "\n"
        "from torch import log\n"
        "from torch.nn.functional import softmax\n"
        "\n"
        "def f(x):\n"
        "    return log(softmax(x, 1))\n"
    )
    [finding] = lint_source(source, "m.py", {"TL104"})
    assert finding.fix is not None
    contents = sorted(e.content for e in finding.fix.edits)
    assert contents == ["from torch.nn.functional import log_softmax\n", "log_softmax(x, 1)"]
    insert = next(e for e in finding.fix.edits if e.content.startswith("from"))
    assert insert.start_line == 4  # before the first import after `from __future__`


def test_anomaly_detection_is_fine_in_tests() -> None:
    source = "import torch\ntorch.autograd.set_detect_anomaly(True)\n"
    assert lint_source(source, "tests/test_train.py", {"TL701"}) == []
    assert lint_source(source, "project/test_model.py", {"TL701"}) == []
    assert len(lint_source(source, "project/train.py", {"TL701"})) == 1


def test_dataloader_without_training_loop_is_fine() -> None:
    source = (
        "import torch\n"
        "from torch.utils.data import DataLoader\n"
        "train_loader = DataLoader(ds, batch_size=8, shuffle=True)\n"
        "for batch in train_loader:\n"
        "    print(model(batch))\n"
    )
    assert lint_source(source, "eval.py", {"TL704"}) == []


def test_torch_load_default_is_safe_from_2_6() -> None:
    source = "import torch\nstate = torch.load('model.pt')\n"
    assert len(lint_source(source, "train.py", {"TL304"})) == 1
    assert len(lint_source(source, "train.py", {"TL304"}, torch_version="2.5")) == 1
    assert lint_source(source, "train.py", {"TL304"}, torch_version="2.6") == []


def test_torch_load_checks_follow_the_installed_torch_without_a_setting(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "train.py").write_text("import torch\nstate = torch.load('model.pt')\n")
    monkeypatch.chdir(tmp_path)

    def codes() -> str:
        main(["--no-cache", "--no-shapes", "--select", "TL304", "train.py"])
        return capsys.readouterr().out

    monkeypatch.setattr(torch_version, "installed_torch_version", lambda: "2.5.1")
    assert "TL304" in codes()
    monkeypatch.setattr(torch_version, "installed_torch_version", lambda: "2.6.0+cpu")
    assert "TL304" not in codes()
    (tmp_path / "pyproject.toml").write_text('[tool.torchlint]\ntorch-version = "2.4"\n')
    clear_cache()
    assert "TL304" in codes()  # the setting wins over the installed torch


def test_installed_torch_version_is_read_without_importing_torch() -> None:
    script = (
        "import sys\n"
        "from torchlint.torch_version import installed_torch_version\n"
        "installed_torch_version()\n"
        "assert 'torch' not in sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", script], check=True)


def test_a_whole_pickled_model_gets_no_weights_only_true() -> None:
    source = "import torch\nmodel = torch.load('model.pt')\nmodel.eval()\n"
    [finding] = lint_source(source, "infer.py", {"TL304"}, torch_version="2.4")
    assert finding.fix is None
    assert "a whole model" in finding.message and "state_dict()" in finding.message
    assert "pass weights_only=True" not in finding.message


def test_map_location_uses_the_device_parameter() -> None:
    source = (
        "import torch\n"
        "def load(path, device):\n"
        "    return torch.load(path, weights_only=True)\n"
        "if torch.cuda.is_available():\n"
        "    pass\n"
    )
    [finding] = lint_source(source, "infer.py", {"TL303"})
    assert finding.fix is not None
    assert finding.fix.edits[0].content == (
        "torch.load(path, weights_only=True, map_location=device)"
    )
