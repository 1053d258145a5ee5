"""Evidence for the shape check read from the linted files (no torch needed)."""

from __future__ import annotations

from pathlib import Path

from torchlint.shapes import discover, evidence

MODEL = """
import torch
import torch.nn as nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 4)

    def forward(self, x):
        return self.fc(x)


class Network(nn.Module):
    def forward(self, x):
        return x
"""

SCRIPT = """
import torch
from model import Net


def helper():
    return torch.randn(3, 5)


@torch.no_grad()
def main():
    model = Net()
    model(torch.randn(2, 8))
"""


def _collect(files: list[tuple[str, str]]) -> dict:
    infos = discover.scan(files)
    return evidence.collect(infos, files, None)


def test_call_sites_in_functions_that_name_the_class_are_read(tmp_path: Path) -> None:
    model, script = str(tmp_path / "model.py"), str(tmp_path / "train.py")
    facts = _collect([(model, MODEL), (script, SCRIPT)])
    found = [e["shapes"] for e in facts[(model, "Net")]["evidence"]]
    assert found == [[[2, 8]]]  # from the decorated `main`; `helper` names no model
    assert facts[(model, "Network")]["evidence"] == []


def test_a_class_is_mentioned_by_its_whole_name_only() -> None:
    names = {"Net": []}
    assert evidence._mentions("m = models.Net(3)", names)
    assert not evidence._mentions("m = Network(3)  # NetBlock, _Net", names)


def test_lines_naming_a_class_are_counted_per_line() -> None:
    counts = evidence._naming_lines("a = 1\r\nb = Net()\rc = 2\nd = Net\n", {"Net": []})
    assert counts == [0, 0, 1, 1, 2, 2]


def test_an_example_tensor_moved_or_cast_keeps_its_shape(tmp_path: Path) -> None:
    """`torch.randn(...).cuda()` in a file's `__main__` demo, `.to(device)`, `.long()`."""
    model = str(tmp_path / "model.py")
    demo = """
if __name__ == "__main__":
    net = Net().cuda()
    img = torch.randn(2, 8).cuda()
    net(img)
    net(torch.randint(0, 9, (3, 8)).to(device).float())
    net(torch.randn(4, 8).to(torch.long))
    net(torch.randn(5, 8).half())
    net(torch.zeros(6, 8).to(dtype=torch.int32))
"""
    facts = _collect([(model, MODEL + demo)])
    found = [(e["shapes"], e["dtypes"]) for e in facts[(model, "Net")]["evidence"]]
    assert found == [
        ([[2, 8]], ["float"]),
        ([[3, 8]], ["float"]),
        ([[4, 8]], ["long"]),
        ([[6, 8]], ["long"]),
    ]


def test_a_name_several_files_define_follows_the_package_that_reexports_it(
    tmp_path: Path,
) -> None:
    """Every file of a zoo has its `ViT`: `from pkg import ViT` is the one `pkg/__init__.py`
    imports (relatively), and the test's tensor is its evidence alone."""
    package = tmp_path / "pkg"
    package.mkdir()
    files = {
        package / "__init__.py": "from .vit import ViT\n",
        package / "vit.py": MODEL.replace("class Net(", "class ViT("),
        package / "other.py": MODEL.replace("class Net(", "class ViT("),
        tmp_path / "test_vit.py": "import torch\nfrom pkg import ViT\n\n"
        "def test_vit():\n    ViT()(torch.randn(4, 8))\n",
    }
    for path, text in files.items():
        path.write_text(text)
    facts = _collect([(str(p), t) for p, t in files.items()])
    assert [e["shapes"] for e in facts[(str(package / "vit.py"), "ViT")]["evidence"]] == [[[4, 8]]]
    assert facts[(str(package / "other.py"), "ViT")]["evidence"] == []
