"""Behaviour of TL104, TL701 and TL704 that a single fixture file cannot show."""

from __future__ import annotations

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
