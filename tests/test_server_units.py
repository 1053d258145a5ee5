"""The server's pure parts: position conversion, noqa and fix edits, hover lookup, shape worker."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

pytest.importorskip("lsprotocol", reason="lsprotocol is not installed")
from lsprotocol import types

from torchlint.diagnostic import Diagnostic, Edit, Fix
from torchlint.server import DOCS_URL, docs_url
from torchlint.server.actions import apply_fixes, fix_all, noqa_edit, replacement
from torchlint.server.convert import Text, split_lines, to_lsp
from torchlint.server.hover import codes_at, hover_text
from torchlint.server.settings import Options
from torchlint.server.shapes import ShapeRunner

ROOT = Path(__file__).resolve().parent.parent


def diag(line: int, col: int, end_line: int, end_col: int, code: str = "TL101", fix=None):
    return Diagnostic("x.py", line, col, end_line, end_col, code, "name", "message", fix=fix)


def apply(text: str, edit: Edit) -> str:
    t = Text(text)
    start = t.offset(edit.start_line, edit.start_column)
    end = t.offset(edit.end_line, edit.end_column)
    return text[:start] + edit.content + text[end:]


# --- positions ---------------------------------------------------------------------------------


def test_lines_end_only_at_lsp_line_breaks() -> None:
    assert split_lines("a\r\nb\rc\nd\x0ce") == ["a\r\n", "b\r", "c\n", "d\x0ce"]
    assert split_lines("a\n") == ["a\n", ""]
    assert split_lines("") == [""]


@pytest.mark.parametrize(
    ("encoding", "start", "end"),
    [("utf-16", 11, 20), ("utf-8", 13, 22), ("utf-32", 10, 19)],
)
def test_ranges_use_the_client_encoding(encoding: str, start: int, end: int) -> None:
    source = "x = 1\ny = ('🔥', F.softmax(z))\n"
    text = Text(source, encoding)
    column = source.splitlines()[1].index("F.softmax") + 1  # 1-based code points
    d = diag(2, column, 2, column + len("F.softmax"))
    assert text.diagnostic_range(d) == types.Range(
        types.Position(line=1, character=start), types.Position(line=1, character=end)
    )
    # ... and back again.
    assert text.line_column(types.Position(line=1, character=start)) == (2, column)


def test_empty_ranges_cover_a_character_and_out_of_range_positions_clamp() -> None:
    text = Text("def f(:\n    pass\n")
    assert text.diagnostic_range(diag(1, 7, 1, 7)) == types.Range(
        types.Position(line=0, character=6), types.Position(line=0, character=7)
    )
    # At a line's end nothing follows: the range stays empty rather than spill over.
    end = text.diagnostic_range(diag(1, 8, 1, 8))
    assert end.start == end.end == types.Position(line=0, character=7)
    # Past the end of the file (EOF errors): the last position.
    past = text.diagnostic_range(diag(9, 1, 9, 1))
    assert past.start == types.Position(line=2, character=0)


def test_crlf_documents() -> None:
    text = Text("a = 1\r\nb = F.softmax(x)\r\n")
    assert text.diagnostic_range(diag(2, 5, 2, 14)) == types.Range(
        types.Position(line=1, character=4), types.Position(line=1, character=13)
    )
    assert text.offset(1, 99) == 5  # clamped before the line break


def test_lsp_diagnostic_fields() -> None:
    lsp = to_lsp(diag(1, 1, 1, 4), Text("abc\n"))
    assert lsp.code == "TL101"
    assert lsp.source == "torchlint"
    assert lsp.code_description is not None
    assert lsp.code_description.href == docs_url("TL101")
    assert docs_url("TL101") == f"{DOCS_URL}#tl101-softmax-before-cross-entropy"
    assert docs_url("XY123") == f"{DOCS_URL}#xy123"
    assert lsp.severity == types.DiagnosticSeverity.Error


# --- noqa --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("loss = f(x)", "loss = f(x)  # noqa: TL101"),
        ("loss = f(x)   ", "loss = f(x)  # noqa: TL101"),
        ("loss = f(x)  # the loss", "loss = f(x)  # the loss  # noqa: TL101"),
        ("loss = f(x)  # noqa: TL102", "loss = f(x)  # noqa: TL102, TL101"),
        ("loss = f(x)  # noqa:TL102,TL103 why", "loss = f(x)  # noqa:TL102,TL103, TL101 why"),
    ],
)
def test_noqa_edit(line: str, expected: str) -> None:
    source = f"import torch\n{line}\nx = 1\n"
    edit = noqa_edit(Text(source), diag(2, 1, 2, 5))
    assert edit is not None
    assert apply(source, edit) == f"import torch\n{expected}\nx = 1\n"


@pytest.mark.parametrize(
    "line", ["loss = f(x)  # noqa", "loss = f(x)  # noqa: TL101", "loss = f(x) + \\"]
)
def test_no_noqa_edit_where_none_helps(line: str) -> None:
    assert noqa_edit(Text(f"{line}\n"), diag(1, 1, 1, 5)) is None


def test_syntax_errors_cannot_be_silenced() -> None:
    assert noqa_edit(Text("def f(:\n"), diag(1, 1, 1, 1, "TL000")) is None


# --- fixes -------------------------------------------------------------------------------------


def test_overlapping_fixes_wait_for_the_next_pass() -> None:
    text = Text("abcdef\n")
    first = Fix("upper", (Edit(1, 1, 1, 4, "ABC"),))
    clash = Fix("clash", (Edit(1, 3, 1, 5, "??"),))
    later = Fix("end", (Edit(1, 5, 1, 7, "EF"),))
    assert apply_fixes(text, [later, clash, first]) == ("ABCdEF\n", 2)


def test_fix_all_relints_until_stable() -> None:
    def lint(source: str) -> list[Diagnostic]:
        # One fix per pass, each overlapping the next: needs several passes.
        index = source.find("a")
        if index < 0:
            return []
        col = index + 1
        return [diag(1, col, 1, col + 1, fix=Fix("a->b", (Edit(1, col, 1, col + 1, "b"),)))]

    assert fix_all("aaa\n", lint, "utf-16") == "bbb\n"


def test_unsafe_fixes_are_left_out_of_fix_all() -> None:
    def lint(source: str) -> list[Diagnostic]:
        fix = Fix("x", (Edit(1, 1, 1, 2, "y"),), safe=False)
        return [diag(1, 1, 1, 2, fix=fix)] if source.startswith("x") else []

    assert fix_all("x\n", lint, "utf-16") == "x\n"
    assert fix_all("x\n", lint, "utf-16", unsafe=True) == "y\n"


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("abc", "abc"),
        ("a\r\nb", "a\nb"),
        ("x = F.softmax(y)\n", "x = F.log_softmax(y)\n"),
        ("", "abc"),
        ("aaa", "aa"),
    ],
)
def test_replacement_is_one_minimal_edit(old: str, new: str) -> None:
    start, end, text = replacement(old, new)
    assert old[:start] + text + old[end:] == new
    assert not (start and old[start - 1] == "\r" and old[start : start + 1] == "\n")


# --- hover -------------------------------------------------------------------------------------


def test_hover_finds_diagnostics_then_noqa_codes() -> None:
    source = "import torch\nx = 1  # noqa: TL000, XYZ123\n"
    text = Text(source)
    assert codes_at(text, [diag(1, 1, 1, 7)], 3)[0] == ["TL101"]
    codes, span = codes_at(text, [], source.index("TL000") + 1)
    assert codes == ["TL000"]
    assert span is not None and source[span[0] : span[1]] == "TL000"
    assert codes_at(text, [], source.index("XYZ123"))[0] == ["XYZ123"]
    assert hover_text(["XYZ123"]) is None  # not a torchlint rule
    assert codes_at(text, [], 2) == ([], None)
    doc = hover_text(["TL000"])
    assert doc is not None and doc.startswith("# syntax-error (TL000)")
    assert docs_url("TL000") in doc


def test_options() -> None:
    assert Options.parse(None) == Options()
    assert Options.parse({"debounceMs": 5, "shapes": False}) == Options(5, False)
    assert Options.parse({"debounceMs": "fast"}).debounce_ms == 30


# --- shape worker ------------------------------------------------------------------------------


@pytest.fixture
def fake_shapes(monkeypatch: pytest.MonkeyPatch) -> ShapeRunner:
    path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    monkeypatch.setenv("PYTHONPATH", path)
    return ShapeRunner(target="tests.test_server_support:fake_check_files")


@pytest.mark.asyncio
async def test_shape_runner_checks_and_is_cancelled_by_killing_the_worker(
    fake_shapes: ShapeRunner,
) -> None:
    found = await fake_shapes.check("m.py", "x = 1  # shape-bug\n")
    assert found is not None and [(d.code, d.line) for d in found] == [("TL6901", 1)]
    worker = fake_shapes._process
    assert worker is not None
    slow = asyncio.ensure_future(fake_shapes.check("m.py", "# shape-delay: 30\n"))
    await asyncio.sleep(0.5)
    slow.cancel()
    with pytest.raises(asyncio.CancelledError):
        await slow
    assert await asyncio.wait_for(worker.wait(), 5) is not None  # killed, not left running
    found = await fake_shapes.check("m.py", "y = 2  # shape-bug\n")  # a new worker
    assert found is not None and len(found) == 1
    await fake_shapes.aclose()


@pytest.mark.asyncio
async def test_shape_runner_without_an_engine_turns_itself_off() -> None:
    runner = ShapeRunner(target="torchlint_no_such_module:check_files")
    assert await runner.check("m.py", "x = 1\n") is None
    assert runner.available is False
    await runner.aclose()


@pytest.mark.parametrize(("target", "reported"), [("2.4", True), ("2.8", False)])
def test_buffers_target_the_configured_torch_like_the_command_line(
    tmp_path: Path, target: str, reported: bool
) -> None:
    from torchlint.server.app import CellText, lint_document, lint_notebook

    (tmp_path / "pyproject.toml").write_text(f'[tool.torchlint]\ntorch-version = "{target}"\n')
    path = tmp_path / "load.py"
    source = "import torch\n\n\ndef load(path):\n    return torch.load(path)\n"
    path.write_text(source)
    linted = lint_document(path, "load.py", source, tmp_path, "utf-16")
    assert ("TL304" in [d.code for d in linted.diagnostics]) is reported
    cells = [CellText("cell", source, 1, 1)]
    notebook = lint_notebook(path, "load.ipynb", cells, tmp_path, "utf-16")
    assert ("TL304" in [d.code for d in notebook.diagnostics]) is reported
