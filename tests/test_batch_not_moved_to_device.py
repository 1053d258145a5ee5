"""TL301 behaviour that depends on the whole file, which the fixture cannot show."""

from __future__ import annotations

import textwrap

from torchlint.engine import lint_source

TRAIN = """
    def fit(model, train_dl, loss_fn, device):
        model.to(device)
        for xb, yb in train_dl:
            loss_fn(model(xb), yb).backward()
"""


def _lines(source: str) -> list[int]:
    code = textwrap.dedent(source) + textwrap.dedent(TRAIN)
    return [d.line for d in lint_source(code, "t.py", {"TL301"})]


def test_unwrapped_loader_is_reported() -> None:
    assert _lines("import torch\n") == [6, 6]


def test_device_loader_wrapper_elsewhere_in_the_file() -> None:
    source = """
        import torch

        class DeviceDataLoader:
            def __init__(self, dl, device):
                self.dl, self.device = dl, device

            def __iter__(self):
                for batch in self.dl:
                    yield [t.to(self.device) for t in batch]
    """
    assert _lines(source) == []


def test_loader_prepared_in_another_function() -> None:
    source = """
        import torch

        def main(accelerator, model, optimizer, train_dl, loss_fn):
            model, optimizer, train_dl = accelerator.prepare(model, optimizer, train_dl)
            fit(model, train_dl, loss_fn, accelerator.device)
    """
    assert _lines(source) == []


def test_dataset_of_this_file_keeps_tensors_on_the_device() -> None:
    source = """
        import torch
        from torch.utils.data import Dataset

        class OnDevice(Dataset):
            def __init__(self, x, y, device):
                self.x, self.y = x.to(device), y.to(device)

            def __getitem__(self, i):
                return self.x[i], self.y[i]
    """
    assert _lines(source) == []
