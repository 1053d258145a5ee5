"""The server's lint of an edited buffer, findings carried over an edit of comments and spacing
or linted again, is always the full lint of the new text, on real files."""

from __future__ import annotations

import random
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("lsprotocol", reason="lsprotocol is not installed")

import torch

from tests.test_server_reparse import random_edit
from torchlint.context import Report
from torchlint.engine import lint_source
from torchlint.server import app, relint
from torchlint.server.app import lint_document
from torchlint.server.reparse import ParsedText, full_parse

ROOT = Path(__file__).resolve().parent.parent
TORCH = Path(torch.__file__).parent
REAL_FILES = [
    *sorted((ROOT / "fixtures").glob("*.py")),
    *sorted((ROOT / "examples").glob("*.py")),
    TORCH / "nn" / "modules" / "container.py",
    TORCH / "optim" / "lr_scheduler.py",
    TORCH / "utils" / "data" / "sampler.py",
]

#: Comments typed: plain, suppressions, and words rules look for in the text.
COMMENTS = [
    "# note",
    "# noqa",
    "# noqa: TL101",
    "# backward",
    "# DataLoader collate",
    "# model.eval() model.train()",
    "# x.requires_grad_(True)",
    "# .forward( on purpose",
    "# torch.cuda.is_available()",
    "# global __main__",
    "# F.softmax(x) nn.CrossEntropyLoss",
]


def layout_edit(rng: random.Random, text: str) -> str:
    """`text` after an edit of its layout (as typed: it may also land in a string): a comment
    at a line's end or on a line of its own, a blank line, spaces, a line broken in brackets,
    a comment deleted."""
    lines = text.split("\n")
    at = rng.randrange(len(lines))
    line = lines[at]
    indent = line[: len(line) - len(line.lstrip())]
    kind = rng.random()
    if kind < 0.35:
        lines[at] = line + "  " + rng.choice(COMMENTS)
    elif kind < 0.55:
        lines.insert(at, indent + rng.choice(COMMENTS))
    elif kind < 0.65:
        lines.insert(at, "")
    elif kind < 0.75:
        found = [m.end() for m in re.finditer(r"[(,\[]", line)]
        if found:
            cut = rng.choice(found)
            lines[at] = line[:cut] + "\n" + indent + "        " + line[cut:].lstrip()
    elif kind < 0.85:
        found = [m.end() for m in re.finditer(r"[(,=]", line)]
        if found:
            cut = rng.choice(found)
            lines[at] = line[:cut] + " " + line[cut:]
    else:
        comments = [i for i, text in enumerate(lines) if "#" in text]
        if comments:
            at = rng.choice(comments)
            lines[at] = lines[at][: lines[at].index("#")].rstrip()
    return "\n".join(lines)


def body_edit(rng: random.Random, text: str) -> str:
    """`text` after an edit of code inside an indented block, as typed while working on one
    function: a digit in a number, a name retyped, a line deleted, duplicated, or a new
    statement, comment or blank line inserted."""
    lines = text.split("\n")
    inside = [i for i, line in enumerate(lines) if line.startswith("    ") and line.strip()]
    if not inside:
        return random_edit(rng, text)
    at = rng.choice(inside)
    line = lines[at]
    indent = line[: len(line) - len(line.lstrip())]
    kind = rng.random()
    numbers = list(re.finditer(r"\b\d+(\.\d+)?\b", line))
    names = list(re.finditer(r"\b[A-Za-z_]\w*\b", line))
    if kind < 0.25 and numbers:
        end = rng.choice(numbers).end()
        lines[at] = line[:end] + str(rng.randrange(10)) + line[end:]
    elif kind < 0.45 and names:
        found = rng.choice(names)
        other = rng.choice([m.group() for m in names] + ["model", "loss", "x", "device"])
        lines[at] = line[: found.start()] + other + line[found.end() :]
    elif kind < 0.6:
        del lines[at]
    elif kind < 0.7:
        lines.insert(at, line)
    elif kind < 0.9:
        statement = rng.choice(
            [
                "x = x.to(device)",
                "loss.backward()",
                "optimizer.zero_grad()",
                "model.eval()",
                "total = total + loss",
                "return x",
                "# note",
                "",
            ]
        )
        lines.insert(at, indent + statement if statement else "")
    else:
        lines[at] = line + "  # note"
    return "\n".join(lines)


def check_edits(
    path: Path,
    seed: int,
    steps: int,
    code_edits: float,
    code_edit: Callable[[random.Random, str], str] = random_edit,
) -> int:
    """Edit `path`'s text `steps` times, linting each version as the server does (from the
    last one that parsed); each must give the full lint's findings. Returns how many
    versions had their findings carried over. `code_edits` of the edits are `code_edit`s,
    the others edits of layout."""
    rng = random.Random(f"{path.name}:{seed}")
    text = path.read_text(encoding="utf-8")
    linted = lint_document(None, path.name, text, ROOT, "utf-16")
    previous = linted.parsed
    found: list[bool] = []

    def carried(*args: Any) -> Any:
        result = relint.carried(*args)
        found.append(result is not None)
        return result

    app.carried = carried  # type: ignore[assignment]
    try:
        for _ in range(steps):
            edit = code_edit if rng.random() < code_edits else layout_edit
            new = edit(rng, text)
            linted = lint_document(None, path.name, new, ROOT, "utf-16", previous)
            settings = linted.settings
            full = lint_source(
                new, path.name, settings.enabled, torch_version=settings.torch_version
            )
            assert linted.diagnostics == full, (path.name, new)
            if isinstance(linted.parsed, ParsedText):
                previous, text = linted.parsed, new
    finally:
        app.carried = relint.carried
    return sum(found)


@pytest.mark.parametrize("path", REAL_FILES, ids=lambda p: p.stem)
def test_edits_of_real_files_lint_as_a_full_lint(path: Path) -> None:
    check_edits(path, seed=1, steps=6, code_edits=0.3)


@pytest.mark.parametrize("path", REAL_FILES[::2], ids=lambda p: p.stem)
def test_edits_inside_functions_lint_as_a_full_lint(path: Path) -> None:
    """Code typed, lines inserted and deleted inside function bodies, one after another."""
    check_edits(path, seed=3, steps=8, code_edits=0.8, code_edit=body_edit)


def test_most_edits_of_layout_are_carried_over() -> None:
    carried = sum(check_edits(path, seed=2, steps=4, code_edits=0.0) for path in REAL_FILES[::3])
    assert carried >= len(REAL_FILES[::3])


def test_a_comment_typed_moves_the_findings_below_it(monkeypatch: pytest.MonkeyPatch) -> None:
    text = (
        "import torch\nimport torch.nn.functional as F\n\n\n"
        "def train(model, x, y):\n    loss = F.cross_entropy(F.softmax(model(x), dim=1), y)\n"
        "    return loss\n"
    )
    first = lint_document(None, "t.py", text, ROOT, "utf-16")
    edited = text.replace("def train", "# a comment\n# another\ndef train")
    results: list[object] = []

    def carried(*args: Any) -> Any:
        results.append(relint.carried(*args))
        return results[-1]

    monkeypatch.setattr(app, "carried", carried)
    second = lint_document(None, "t.py", edited, ROOT, "utf-16", first.parsed)
    assert results and results[0] is not None  # carried over, not linted again
    assert [d.line for d in first.diagnostics] == [6]
    assert [d.line for d in second.diagnostics] == [8]
    assert second.diagnostics == lint_source(edited, "t.py", second.settings.enabled)


def test_a_comment_that_a_rule_reads_is_linted_again() -> None:
    text = "import torch\n\n\ndef f(model, x):\n    return model.forward(x)\n"
    first = lint_document(None, "t.py", text, ROOT, "utf-16")
    assert [d.code for d in first.diagnostics] == ["TL403"]
    edited = text.replace("model.forward(x)", "model.forward(x)  # bypass the hooks")
    second = lint_document(None, "t.py", edited, ROOT, "utf-16", first.parsed)
    assert second.diagnostics == [] == lint_source(edited, "t.py", second.settings.enabled)


def test_a_text_that_does_not_parse_is_not_carried_over() -> None:
    text = "import torch\n\n\ndef f(x):\n    return torch.load(x)\n"
    first = lint_document(None, "t.py", text, ROOT, "utf-16")
    broken = text.replace("return", "return (")
    assert not isinstance(full_parse(broken), ParsedText)
    second = lint_document(None, "t.py", broken, ROOT, "utf-16", first.parsed)
    assert [d.code for d in second.diagnostics] == ["TL000"]


def test_a_finding_on_the_module_is_moved_to_the_new_module() -> None:
    text = (
        "import torch\nimport torch.nn.functional as F\n\n\n"
        "def train(model, x, y):\n    return F.cross_entropy(F.softmax(model(x), dim=1), y)\n"
    )
    first = lint_document(None, "t.py", text, ROOT, "utf-16")
    assert first.parsed is not None
    record = next(iter(first.parsed.lints.values()))
    rule = record.reports[0].rule
    record.reports.append(Report(rule, first.parsed.module, "on the file", None))
    edited = text.replace("def train", "# note\ndef train")
    second = lint_document(None, "t.py", edited, ROOT, "utf-16", first.parsed)
    assert [(d.line, d.message[:11]) for d in second.diagnostics] == [
        (1, "on the file"),
        (7, first.diagnostics[0].message[:11]),
    ]
