"""Bad input is reported once, with its path, and never stops the run."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import BUGGY, run_cli
from torchlint import engine
from torchlint.cli import main
from torchlint.fixing import write_atomically
from torchlint.parse_guard import complexity_error
from torchlint.registry import all_rules
from torchlint.rule import Rule


def _lines(result) -> list[str]:
    return [line for line in result.stdout.splitlines() if ": TL" in line]


def test_each_bad_file_is_reported_and_the_rest_checked(tmp_path: Path) -> None:
    (tmp_path / "good.py").write_text(BUGGY)
    (tmp_path / "syntax.py").write_text("import torch\ndef f(:\n")
    (tmp_path / "nul.py").write_bytes(b"import torch\x00\n")
    (tmp_path / "latin.py").write_bytes("import torch\n# caf\xe9\n".encode("latin-1"))
    (tmp_path / "empty.py").write_text("")
    os.symlink("dangling-target.py", tmp_path / "dangling.py")
    (tmp_path / "loop").mkdir()
    os.symlink("..", tmp_path / "loop" / "back")
    result = run_cli(".", "--no-cache", cwd=tmp_path)
    assert result.returncode == 1
    assert "Traceback" not in result.stderr + result.stdout
    lines = _lines(result)
    assert any(line.startswith("good.py:5:28: TL101") for line in lines)
    assert any(line.startswith("syntax.py:2:7: TL000 SyntaxError") for line in lines)
    assert any(line.startswith("nul.py:1:1: TL000") and "null byte" in line for line in lines)
    assert any(line.startswith("latin.py:1:1: TL000") and "utf-8" in line for line in lines)
    assert any(line.startswith("dangling.py:1:1: TL000 cannot read file") for line in lines)
    assert not any(line.startswith("empty.py") for line in lines)
    assert result.stderr.count("symbolic link loop") == 1
    # The loop was not followed: each file appears once.
    assert sum(line.startswith("good.py") for line in lines) == 1


def test_encoding_cookie_is_honoured(tmp_path: Path) -> None:
    source = "# -*- coding: latin-1 -*-\n# caf\xe9\n" + BUGGY
    (tmp_path / "m.py").write_bytes(source.encode("latin-1"))
    assert "m.py:7:28: TL101" in run_cli("m.py", cwd=tmp_path).stdout


def test_huge_file_is_skipped_with_a_warning(tmp_path: Path) -> None:
    (tmp_path / "huge.py").write_text("import torch\n" + "x = 1\n" * 900_000)
    (tmp_path / "good.py").write_text(BUGGY)
    result = run_cli(".", "--no-cache", cwd=tmp_path)
    assert "huge.py: skipped, 5.4 MB is over max-file-size-kb" in result.stderr
    assert "good.py:5:28: TL101" in result.stdout


def test_twenty_thousand_files(tmp_path: Path) -> None:
    for i in range(20_000):
        (tmp_path / f"m{i}.py").write_text("x = 1\n")
    (tmp_path / "zz_bad.py").write_text(BUGGY)
    result = run_cli(".", "--no-cache", cwd=tmp_path)
    assert result.returncode == 1 and _lines(result) == [result.stdout.splitlines()[0]]


class _CrashingRule(Rule):
    """
    ## What it does
    Raises, to test that the engine survives a broken rule.
    """

    code = "TL998"
    name = "always-crashes"

    def visit_Call(self, node) -> None:
        raise ValueError("boom")


def test_a_crashing_rule_keeps_the_other_rules_results(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(all_rules(), "TL998", _CrashingRule)
    diagnostics = engine.lint_source(BUGGY, "m.py", {"TL101", "TL998"})
    codes = [d.code for d in diagnostics]
    assert codes == ["TL999", "TL101"]
    assert "TL998 (always-crashes)" in diagnostics[0].message
    assert "ValueError: boom" in diagnostics[0].message
    (tmp_path / "m.py").write_text(BUGGY)
    monkeypatch.chdir(tmp_path)
    assert main(["m.py", "--no-cache", "--jobs", "1", "--select", "TL101,TL998"]) == 2
    out = capsys.readouterr()
    assert "TL999" in out.out and "TL101" in out.out and "Traceback" not in out.err


# Each builds the body of `x = ...` that would crash or stall LibCST without the guard.
_HOSTILE_EXPRESSIONS = {
    "parens": "(" * 5000 + "1" + ")" * 5000,
    "brackets": "[" * 5000 + "1" + "]" * 5000,
    "sum": " + ".join(["a"] * 20_000),
    "sum_over_lines": "(" + " +\n".join(["a"] * 20_000) + ")",
    "sum_continued": " + \\\n".join(["a"] * 20_000),
    "attributes": "a" + ".b" * 20_000,
    "calls": "a" + "()" * 4000,
    "calls_with_arguments": " + ".join(["f(a, b=1)"] * 5000),
    "nots": "not " * 20_000 + "a",
    "lambdas": "lambda: " * 4000 + "1",
    "nested_unary": "(-" * 199 + "-" * 2000 + "1" + ")" * 199,
}


@pytest.mark.parametrize("name", sorted(_HOSTILE_EXPRESSIONS))
def test_hostile_nesting_costs_only_its_file(tmp_path: Path, name: str) -> None:
    source = f"{BUGGY}x = {_HOSTILE_EXPRESSIONS[name]}\n"  # BUGGY makes rules look at it
    (tmp_path / "hostile.py").write_text(source)
    (tmp_path / "good.py").write_text(BUGGY)
    result = run_cli(".", "--no-cache", "--no-shapes", cwd=tmp_path)
    assert result.returncode == 1, result.stderr
    lines = _lines(result)
    assert any(line.startswith("good.py:5:28: TL101") for line in lines)
    reported = [line for line in lines if line.startswith("hostile.py:1:1: TL000")]
    assert len(reported) == 1
    assert "too deeply nested to analyse" in reported[0] or "too long to analyse" in reported[0]


def test_the_guard_passes_the_installed_torch_sources() -> None:
    """Real code, the largest Python package at hand, is far from either threshold."""
    torch_dir = Path(__import__("importlib.util").util.find_spec("torch").origin).parent
    flagged = [
        path
        for path in sorted((torch_dir / "nn").rglob("*.py"))
        if complexity_error(path.read_text(encoding="utf-8", errors="replace"))
    ]
    assert flagged == []


def test_a_file_that_does_not_parse_is_parsed_once(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = []
    real = engine.cst.parse_module
    monkeypatch.setattr(engine.cst, "parse_module", lambda s: calls.append(s) or real(s))
    diagnostics = engine.lint_source("import torch\ndef f(:\n", "m.py", set(all_rules()))
    assert [d.code for d in diagnostics] == ["TL000"] and len(calls) == 1


def test_rules_survive_the_longest_expression_the_guard_lets_through(tmp_path: Path) -> None:
    terms = " + ".join(["torch.zeros(3)"] * 160)  # about 480 operators: just under the limit
    chains = {
        "sum": terms,
        "attributes": "x" + ".b" * 490,
        "subscripts": "x" + "[0]" * 490,
        "nots": "not " * 490 + "x",
    }
    for name, expression in chains.items():
        source = (
            "import torch\n\n\nclass M(torch.nn.Module):\n"
            f"    def forward(self, x):\n        y = {expression}\n        return y\n"
        )
        assert complexity_error(source) is None, name
        codes = [d.code for d in engine.lint_source(source, "m.py", set(all_rules()))]
        assert "TL999" not in codes and "TL000" not in codes, name


def test_unreadable_notebook_json_costs_only_its_file(tmp_path: Path) -> None:
    (tmp_path / "deep.ipynb").write_text("[" * 100_000 + "]" * 100_000)
    (tmp_path / "bigint.ipynb").write_text('{"nbformat": 4, "x": ' + "9" * 5000 + "}")
    (tmp_path / "good.py").write_text(BUGGY)
    result = run_cli(".", "--no-cache", "--no-shapes", cwd=tmp_path)
    assert result.returncode == 1 and "Traceback" not in result.stderr
    lines = _lines(result)
    assert any(line.startswith("good.py:5:28: TL101") for line in lines)
    assert any(line.startswith("deep.ipynb:1:1: TL000") and "too deeply" in line for line in lines)
    assert any(line.startswith("bigint.ipynb:1:1: TL000") and "digits" in line for line in lines)


def test_a_loop_of_file_links_is_skipped_with_a_warning(tmp_path: Path) -> None:
    (tmp_path / "good.py").write_text(BUGGY)
    os.symlink("b.py", tmp_path / "a.py")
    os.symlink("a.py", tmp_path / "b.py")
    os.symlink("itself.py", tmp_path / "itself.py")
    result = run_cli(".", "--no-cache", "--no-shapes", cwd=tmp_path)
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert [line[:18] for line in _lines(result)] == ["good.py:5:28: TL101"[:18]]
    assert result.stderr.count("symbolic link loop, not followed") == 3


_FIXABLE = """\
import torch
import torch.nn.functional as F


def log_probs(logits):
    return torch.log(F.softmax(logits, dim=1))
"""


def test_fix_writes_through_hard_links(tmp_path: Path) -> None:
    path, twin = tmp_path / "m.py", tmp_path / "twin.py"
    path.write_text(_FIXABLE)
    os.link(path, twin)
    inode = path.stat().st_ino
    result = run_cli("m.py", "--fix", "--no-cache", "--no-shapes", cwd=tmp_path)
    assert "1 fixed" in result.stdout, result.stdout + result.stderr
    assert "F.log_softmax(logits, dim=1)" in path.read_text()
    assert twin.read_text() == path.read_text() and path.stat().st_ino == inode


def test_a_single_link_file_is_still_replaced_atomically(tmp_path: Path) -> None:
    path = tmp_path / "m.py"
    path.write_text("old\n")
    inode = path.stat().st_ino
    write_atomically(path, b"new\n", expected=b"old\n")
    assert path.read_text() == "new\n" and path.stat().st_ino != inode


@pytest.mark.skipif(os.geteuid() != 0, reason="only root can give a file to another owner")
def test_fix_keeps_the_owner_and_group(tmp_path: Path) -> None:
    path = tmp_path / "m.py"
    path.write_text("old\n")
    os.chown(path, 4321, 4322)
    write_atomically(path, b"new\n", expected=b"old\n")
    info = path.stat()
    assert (info.st_uid, info.st_gid) == (4321, 4322) and path.read_text() == "new\n"


def test_a_crlf_notebook_is_fixed_and_keeps_its_line_endings(tmp_path: Path) -> None:
    fixture = Path(__file__).resolve().parent.parent / "fixtures" / "notebooks" / "training.ipynb"
    path = tmp_path / "nb.ipynb"
    original = fixture.read_bytes().replace(b"\n", b"\r\n")
    path.write_bytes(original)
    diff = run_cli("nb.ipynb", "--diff", "--no-cache", "--no-shapes", cwd=tmp_path)
    assert "+    return F.log_softmax(logits, dim=1)" in diff.stdout
    result = run_cli("nb.ipynb", "--fix", "--no-cache", "--no-shapes", cwd=tmp_path)
    assert "1 fixed" in result.stdout, result.stdout + result.stderr
    fixed = path.read_bytes()
    assert b"F.log_softmax(logits, dim=1)" in fixed
    assert fixed.count(b"\r\n") == original.count(b"\r\n") and b"\r\r" not in fixed
    expected = original.replace(
        b"torch.log(F.softmax(logits, dim=1))", b"F.log_softmax(logits, dim=1)"
    )
    assert fixed == expected


_ROOT = Path(__file__).resolve().parent.parent
_SNIPPETS = [
    b"(",
    b")",
    b"[",
    b"]",
    b"{",
    b"}",
    b":",
    b",",
    b"\\\n",
    b"\n    ",
    b'"""',
    b"'",
    b"lambda",
    b" not ",
    b".",
    b"**",
    b"\x00",
    b"\xff\xfe",
    b"\r",
    b"\t",
    b"#",
    b"@",
    b"torch.",
    b"def forward(self, x):\n",
    b"import torch\n",
    b"=",
    b"%%time\n",
    b"!",
]


def _mutate(data: bytes, rng: random.Random) -> bytes:
    """One random edit: delete, duplicate, insert a snippet, swap lines, flip a byte, truncate."""
    if not data:
        return rng.choice(_SNIPPETS)
    a, b = sorted(rng.randrange(len(data) + 1) for _ in range(2))
    kind = rng.randrange(6)
    if kind == 0:
        return data[:a] + data[b : b + (b - a) // 4] + data[b:]
    if kind == 1:
        return data[:b] + data[a:b] * rng.randint(1, 3) + data[b:]
    if kind == 2:
        return data[:a] + rng.choice(_SNIPPETS) * rng.randint(1, 40) + data[a:]
    if kind == 3:
        lines = data.splitlines(keepends=True)
        i, j = rng.randrange(len(lines)), rng.randrange(len(lines))
        lines[i], lines[j] = lines[j], lines[i]
        return b"".join(lines)
    if kind == 4:
        return data[:a] + bytes([rng.randrange(256)]) + data[a + 1 :]
    return data[:a]


def test_fuzzed_real_files_are_each_reported_without_a_crash(tmp_path: Path) -> None:
    """Mutated fixtures and examples: every file is checked, no traceback, no rule crash."""
    rng = random.Random(20_240_601)
    sources = sorted(
        p
        for p in [*(_ROOT / "fixtures").rglob("*"), *(_ROOT / "examples").rglob("*.py")]
        if p.suffix in (".py", ".ipynb")
    )
    names = []
    for index, source in enumerate(sources):
        data = source.read_bytes()
        for variant in range(3):
            for _ in range(rng.randint(1, 4)):
                data = _mutate(data, rng)
            name = f"f{index:03d}_{variant}{source.suffix}"
            (tmp_path / name).write_bytes(data)
            names.append(name)
    script = (
        "import json, sys\nfrom pathlib import Path\n"
        "from torchlint.config import Overrides\nfrom torchlint.runner import RunOptions, run\n"
        "r = run([Path('.')], Overrides(shapes='off'), RunOptions(use_cache=False, jobs=1))\n"
        "print(json.dumps({'files': r.files, 'codes': [[d.path, d.code, d.message]"
        " for d in r.diagnostics]}))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=tmp_path, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr[-3000:]
    result = json.loads(done.stdout)
    assert sorted(result["files"]) == sorted(names)
    crashes = [entry for entry in result["codes"] if entry[1] == "TL999"]
    assert crashes == []
