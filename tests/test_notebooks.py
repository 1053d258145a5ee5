"""Jupyter notebooks: cells joined into one module, IPython syntax masked, fixes per cell."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.conftest import run_cli
from tests.fixture_expectations import expected_in_notebook
from torchlint.inputs import fix_input, lint_input
from torchlint.notebook import mask_cell
from torchlint.registry import all_rules

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
NOTEBOOKS = sorted(FIXTURES.rglob("*.ipynb"))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_fixture_diagnostics(path: Path) -> None:
    diagnostics = lint_input(str(path), path.read_bytes(), set(all_rules()))
    found = {(d.cell, d.line, d.code) for d in diagnostics}
    assert found == expected_in_notebook(path), "\n".join(
        f"cell {d.cell}:{d.line}:{d.column} {d.code} {d.message}" for d in diagnostics
    )


def test_ipython_syntax_is_masked_with_the_same_line_count() -> None:
    cell = "%matplotlib inline\n!pip install x\nfiles = !ls\nobj?\n??obj\n%time y = 1\nz = 2"
    masked = mask_cell(cell)
    assert len(masked) == 7 and masked[-1] == "z = 2"
    assert all(line.startswith("pass") for line in masked[:-1])
    assert mask_cell("%%bash\nfor x in ; do") == ["", ""]
    assert mask_cell("%%time\nx = 1")[1] == "x = 1"
    assert (
        mask_cell("for i in range(3):\n    %time f(i)")[1]
        == "    pass  # torchlint: masked IPython syntax"
    )


def test_operator_lines_inside_an_open_bracket_are_python() -> None:
    cell = 'text = (\n    "%d of %d"\n    % (a, b))\nsame = (a\n        != b)\n'
    cell += "x = 1 + \\\n    2\n%time y = 1"
    masked = mask_cell(cell)
    assert masked[:6] == cell.split("\n")[:6]
    assert masked[-1] == "pass  # torchlint: masked IPython syntax"


def test_shell_command_continued_on_indented_lines_is_masked() -> None:
    cell = "!pip install -q -U \\\n    torch \\\n    torchvision\nimport torch\nx = 1 + \\\n    2"
    notebook = {
        "nbformat": 4,
        "nbformat_minor": 5,
        "metadata": {},
        "cells": [
            {
                "cell_type": "code",
                "execution_count": None,
                "metadata": {},
                "source": cell,
                "outputs": [],
            }
        ],
    }
    data = json.dumps(notebook).encode()
    assert lint_input("setup.ipynb", data, set(all_rules())) == []
    masked = mask_cell(cell)
    assert masked[:3] == ["pass  # torchlint: masked IPython syntax"] * 3
    assert masked[3:] == ["import torch", "x = 1 + \\", "    2"]


def test_text_and_json_output_name_the_cell(tmp_path: Path) -> None:
    shutil.copy(FIXTURES / "notebooks" / "training.ipynb", tmp_path / "nb.ipynb")
    result = run_cli(".", "--no-cache", cwd=tmp_path)
    assert "nb.ipynb:cell 7:5:26: TL101" in result.stdout
    data = json.loads(run_cli(".", "--output-format", "json", cwd=tmp_path).stdout)
    item = next(d for d in data if d["code"] == "TL101")
    assert item["cell"] == 7 and item["location"]["row"] == 5


def test_lines_named_in_a_message_are_named_by_their_cell() -> None:
    """A message that names another line (`opt.zero_grad` on line N) names it as the user
    finds it, by cell and line, not by its line in the joined module."""
    sources = [
        "import torch\nmodel = torch.nn.Linear(2, 2)\nopt = torch.optim.SGD(model.parameters())",
        "# Training",
        "for x, y in [(torch.randn(4, 2), torch.randn(4, 2))]:\n    opt.zero_grad\n"
        "    loss = ((model(x) - y) ** 2).mean()\n    loss.backward()\n    opt.step()",
    ]
    cells = [
        {"cell_type": "markdown", "metadata": {}, "source": text}
        if text.startswith("#")
        else {
            "cell_type": "code",
            "metadata": {},
            "source": text,
            "outputs": [],
            "execution_count": 1,
        }
        for text in sources
    ]
    data = json.dumps({"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 4})
    (found,) = lint_input("train.ipynb", data.encode(), {"TL501"})
    assert (found.cell, found.line) == (3, 5)
    assert "`opt.zero_grad` on cell 3, line 2 only names the method" in found.message


def test_malformed_notebooks_are_reported_and_the_run_continues(tmp_path: Path) -> None:
    (tmp_path / "broken.ipynb").write_text("{not json")
    (tmp_path / "old.ipynb").write_text(json.dumps({"nbformat": 3, "worksheets": []}))
    (tmp_path / "invalid.ipynb").write_text(json.dumps({"nbformat": 4, "cells": "nope"}))
    shutil.copy(FIXTURES / "notebooks" / "training.ipynb", tmp_path / "good.ipynb")
    result = run_cli(".", "--no-cache", cwd=tmp_path)
    out = result.stdout
    assert "broken.ipynb:1:1: TL000 cannot read notebook: not valid JSON" in out
    assert "old.ipynb:1:1: TL000 cannot read notebook: not an nbformat 4 notebook" in out
    assert "invalid.ipynb:1:1: TL000 cannot read notebook: not a valid nbformat 4" in out
    assert "good.ipynb:cell 7:5:26: TL101" in out
    assert "Traceback" not in result.stderr


def test_fix_changes_only_the_fixed_cell_sources(tmp_path: Path) -> None:
    nbformat = pytest.importorskip("nbformat")
    path = tmp_path / "nb.ipynb"
    shutil.copy(FIXTURES / "notebooks" / "training.ipynb", path)
    before = json.loads(path.read_text())
    result = run_cli("nb.ipynb", "--fix", "--no-cache", cwd=tmp_path)
    assert "1 fixed" in result.stdout
    text = path.read_text()
    after = json.loads(text)
    nbformat.validate(nbformat.reads(text, as_version=4))
    changed = [
        i for i, (a, b) in enumerate(zip(before["cells"], after["cells"], strict=True)) if a != b
    ]
    assert changed == [8]
    assert "F.log_softmax(logits, dim=1)" in "".join(after["cells"][8]["source"])
    # Everything but that cell's source is identical, down to the bytes of the JSON.
    after["cells"][8]["source"] = before["cells"][8]["source"]
    assert after == before
    restored = json.dumps(after, indent=1, ensure_ascii=False) + "\n"
    assert restored == (FIXTURES / "notebooks" / "training.ipynb").read_text()
    # A second run has nothing left to fix.
    again = fix_input(str(path), path.read_bytes(), set(all_rules()), unsafe=False)
    assert again.data is None


def test_unsafe_fix_of_a_softmax_lands_in_its_cell(tmp_path: Path) -> None:
    path = tmp_path / "nb.ipynb"
    shutil.copy(FIXTURES / "notebooks" / "TL101.ipynb", path)
    before = json.loads(path.read_text())
    result = run_cli("nb.ipynb", "--fix", "--unsafe-fixes", "--no-cache", cwd=tmp_path)
    assert "1 fixed" in result.stdout
    after = json.loads(path.read_text())
    assert "".join(after["cells"][3]["source"]) == (
        "%%time\n"
        "for x, y in [(torch.randn(4, 784), torch.tensor([0, 1, 2, 3]))]:\n"
        "    optimizer.zero_grad()\n"
        "    loss = criterion(model(x), y)  # error: TL101\n"
        "    loss.backward()\n"
        "    optimizer.step()"
    )
    after["cells"][3]["source"] = before["cells"][3]["source"]
    assert after == before
    again = fix_input(str(path), path.read_bytes(), set(all_rules()), unsafe=True)
    assert again.data is None


def test_notebook_wide_noqa_in_the_first_code_cell(tmp_path: Path) -> None:
    data = json.loads((FIXTURES / "notebooks" / "training.ipynb").read_text())
    first = next(c for c in data["cells"] if c["cell_type"] == "code")
    first["source"] = ["# torchlint: noqa\n", *first["source"]]
    (tmp_path / "nb.ipynb").write_text(json.dumps(data, indent=1))
    assert run_cli("nb.ipynb", "--no-cache", cwd=tmp_path).returncode == 0


def test_diff_is_per_cell_and_writes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "nb.ipynb"
    shutil.copy(FIXTURES / "notebooks" / "training.ipynb", path)
    original = path.read_bytes()
    result = run_cli("nb.ipynb", "--diff", "--no-cache", cwd=tmp_path)
    assert result.returncode == 1
    assert "--- nb.ipynb:cell 9\n+++ nb.ipynb:cell 9\n" in result.stdout
    assert path.read_bytes() == original


def test_a_cell_that_starts_indented_runs_dedented_and_keeps_its_columns() -> None:
    # IPython strips the first line's indent from every line of a cell before running it.
    cell = "    import torch\n    x = torch.randn(2, 3)\n    y = torch.log(torch.softmax(x, dim=1))"
    notebook = {
        "nbformat": 4,
        "nbformat_minor": 5,
        "metadata": {},
        "cells": [
            {"cell_type": "code", "execution_count": None, "id": "a", "metadata": {}}
            | {"source": cell, "outputs": []}
        ],
    }
    data = json.dumps(notebook, indent=1).encode()
    diagnostics = lint_input("nb.ipynb", data, set(all_rules()))
    assert [(d.code, d.cell, d.line, d.column) for d in diagnostics] == [("TL104", 1, 3, 9)]
    fixed = fix_input("nb.ipynb", data, set(all_rules()), unsafe=False)
    assert fixed.data is not None
    source = json.loads(fixed.data)["cells"][0]["source"]
    assert source.splitlines()[2] == "    y = torch.log_softmax(x, dim=1)"
