"""`--fix`, `--diff` and `--unsafe-fixes`: fixes that users can trust."""

from __future__ import annotations

import codecs
import os
import stat
from pathlib import Path

import libcst as cst
import pytest

from torchlint.cli import main
from torchlint.engine import lint_source
from torchlint.fixes import FixBuilder
from torchlint.fixing import FileChangedError, fix_source, write_atomically
from torchlint.registry import all_rules
from torchlint.rule import Rule

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
FIXED = sorted(FIXTURES.glob("TL*.fixed.py"))


@pytest.mark.parametrize("expected", FIXED, ids=lambda p: p.name.split(".")[0])
def test_fixture_fixes_match_the_fixed_file_and_are_idempotent(expected: Path) -> None:
    source = expected.with_name(expected.name.replace(".fixed", "")).read_text(encoding="utf-8")
    codes = set(all_rules())

    def lint(text: str) -> list:
        return lint_source(text, "fixture.py", codes)

    once = fix_source(source, lint, unsafe=True)
    assert once.source == expected.read_text(encoding="utf-8")
    assert once.fixed > 0
    twice = fix_source(once.source, lint, unsafe=True)
    assert twice.source == once.source and twice.fixed == 0


class _RenameSoftmax(Rule):
    """
    ## What it does
    Test rule: renames `torch.softmax` to `torch.special.softmax`; safe.
    """

    code = "TL991"
    name = "test-rename"
    triggers = ("softmax",)
    fix_availability = "safe"

    def visit_Call(self, node: cst.Call) -> None:
        if self.context.code(node.func) == "torch.softmax":
            new = cst.parse_expression("torch.special.softmax")
            self.report(node, "rename", fix=FixBuilder("rename", [(node.func, new)]))


class _BreakEverything(Rule):
    """
    ## What it does
    Test rule: an unsafe fix that would leave the file unparsable.
    """

    code = "TL992"
    name = "test-breaks"
    triggers = ("softmax",)
    fix_availability = "unsafe"

    def visit_Call(self, node: cst.Call) -> None:
        if self.context.code(node.func) == "torch.softmax":
            self.report(node, "breaks", fix=FixBuilder("break", [(node, "((")], safe=False))


SOURCE = "import torch\n\ny = torch.softmax(x, 1)\nz = torch.softmax(y, 1)\n"
FIXED_SOURCE = SOURCE.replace("torch.softmax", "torch.special.softmax")


@pytest.fixture
def fake_rules(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    monkeypatch.setitem(all_rules(), "TL991", _RenameSoftmax)
    monkeypatch.setitem(all_rules(), "TL992", _BreakEverything)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _check(*args: str) -> int:
    return main(["--no-cache", "--jobs", "1", *args])


def test_fix_writes_and_reports(fake_rules: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (fake_rules / "m.py").write_text(SOURCE)
    assert _check("m.py", "--select", "TL991") == 1
    assert "TL991 [*] rename" in capsys.readouterr().out
    assert _check("m.py", "--select", "TL991", "--fix") == 0
    assert (fake_rules / "m.py").read_text() == FIXED_SOURCE
    assert "2 fixed, 0 remaining" in capsys.readouterr().out


def test_diff_writes_nothing(fake_rules: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (fake_rules / "m.py").write_text(SOURCE)
    assert _check("m.py", "--select", "TL991", "--diff") == 1
    out = capsys.readouterr().out
    assert "-y = torch.softmax(x, 1)\n-z = torch.softmax(y, 1)\n+y = torch.special" in out
    assert (fake_rules / "m.py").read_text() == SOURCE


def test_fix_on_stdin_prints_the_fixed_source(
    fake_rules: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import io
    import sys

    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(SOURCE.encode())))
    assert _check("--stdin-filename", "m.py", "--select", "TL991", "--fix") == 0
    assert capsys.readouterr().out == FIXED_SOURCE


def test_crlf_bom_encoding_and_permissions_survive(fake_rules: Path) -> None:
    path = fake_rules / "m.py"
    text = "# -*- coding: utf-8 -*-\n# café\n" + SOURCE
    path.write_bytes(codecs.BOM_UTF8 + text.replace("\n", "\r\n").encode())
    os.chmod(path, 0o754)
    assert _check("m.py", "--select", "TL991", "--fix") == 0
    data = path.read_bytes()
    assert data.startswith(codecs.BOM_UTF8)
    expected = "# -*- coding: utf-8 -*-\n# café\n" + FIXED_SOURCE
    assert data[3:].decode() == expected.replace("\n", "\r\n")
    assert stat.S_IMODE(path.stat().st_mode) == 0o754


def test_unsafe_fixes_only_on_request_and_never_unparsable(
    fake_rules: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = fake_rules / "m.py"
    path.write_text(SOURCE)
    assert _check("m.py", "--select", "TL992", "--fix") == 1
    assert "hidden fixes can be enabled with `--unsafe-fixes`" in capsys.readouterr().out
    assert _check("m.py", "--select", "TL992", "--fix", "--unsafe-fixes") == 1
    assert path.read_text() == SOURCE  # the fix would not parse, so nothing was written


def test_a_file_changed_since_it_was_read_is_not_written(tmp_path: Path) -> None:
    path = tmp_path / "m.py"
    path.write_text("new content\n")
    with pytest.raises(FileChangedError):
        write_atomically(path, b"fixed\n", expected=b"old content\n")
    assert path.read_text() == "new content\n"
    write_atomically(path, b"fixed\n", expected=b"new content\n")
    assert path.read_text() == "fixed\n"
    assert [p.name for p in tmp_path.iterdir()] == ["m.py"]  # no temp file left behind


def test_container_fix_adds_the_nn_import_when_the_file_has_none() -> None:
    source = (
        '"""Model."""\n'
        "from torch.nn import Linear, Module\n"
        "\n"
        "\n"
        "class Stack(Module):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.layers = [Linear(2, 2), Linear(2, 2)]\n"
    )

    def lint(text: str) -> list:
        return lint_source(text, "model.py", {"TL401"})

    fixed = fix_source(source, lint).source
    assert fixed == source.replace(
        "from torch.nn import Linear, Module\n",
        "from torch.nn import ModuleList\nfrom torch.nn import Linear, Module\n",
    ).replace("[Linear(2, 2), Linear(2, 2)]", "ModuleList([Linear(2, 2), Linear(2, 2)])")
    assert fix_source(fixed, lint).fixed == 0


def test_softmax_layer_is_removed_only_when_the_model_feeds_nothing_else() -> None:
    source = (
        "import torch.nn as nn\n"
        "\n"
        "model = nn.Sequential(\n"
        "    nn.Linear(8, 3),\n"
        "    nn.Softmax(dim=1),\n"
        ")\n"
        "criterion = nn.CrossEntropyLoss()\n"
        "optimizer = torch.optim.SGD(model.parameters(), lr=0.1)\n"
        "loss = criterion(model(x), y)\n"
    )

    def lint(text: str) -> list:
        return lint_source(text, "train.py", {"TL101"})

    fixed = fix_source(source, lint, unsafe=True)
    assert fixed.source == source.replace("    nn.Softmax(dim=1),\n", "")
    assert fixed.remaining == []
    assert fix_source(source, lint).fixed == 0  # the fix is unsafe
    predicting = source + "probs = model(x_test)\n"
    assert fix_source(predicting, lint, unsafe=True).fixed == 0
